//! Where a key path sits in the YAML text, for messages about files (`line 7, column 9`). Best effort over the
//! text itself: block mappings and block lists are followed exactly; inside a flow collection (`{...}`,
//! `[...]`) the key is searched on the lines of the enclosing item. `None` when it cannot be told.

/// One step of a key path: a mapping key or a list position.
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// Splits `SmartDevices.Devices[2].Outputs[0].Colour` into its steps.
fn steps(path: &str) -> Vec<Step<'_>> {
    let mut out = Vec::new();
    for part in path.split('.') {
        let (key, rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !key.is_empty() {
            out.push(Step::Key(key));
        }
        for idx in rest.split('[').filter(|s| !s.is_empty()) {
            match idx.trim_end_matches(']').parse() {
                Ok(n) => out.push(Step::Index(n)),
                Err(_) => return Vec::new(),
            }
        }
    }
    out
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

fn content(line: &str) -> &str {
    let t = line.trim_start_matches(' ');
    if t.starts_with('#') { "" } else { t }
}

/// The 1-based line and column of `path` in `text`.
pub(crate) fn locate(text: &str, path: &str) -> Option<(usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let steps = steps(path);
    if steps.is_empty() || lines.len() > 100_000 {
        return None;
    }
    // The block being searched: lines [from, to) whose content is indented more than `parent`.
    let (mut from, mut to, mut parent): (usize, usize, isize) = (0, lines.len(), -1);
    let mut found = None;
    for step in &steps {
        let block_end = |start: usize, ind: isize| {
            (start..to)
                .find(|&j| {
                    let c = content(lines[j]);
                    !c.is_empty() && (indent(lines[j]) as isize) <= ind
                })
                .unwrap_or(to)
        };
        match step {
            Step::Key(k) => {
                let pat = format!("{k}:");
                let mut hit = None;
                for (j, line) in lines.iter().enumerate().take(to).skip(from) {
                    let c = content(line);
                    let ind = indent(line) as isize;
                    // A block key at this level (also right after a list dash).
                    let body = c.strip_prefix("- ").unwrap_or(c);
                    let col = ind as usize + (c.len() - body.len());
                    if ind > parent && body.starts_with(&pat) {
                        hit = Some((j, col, col as isize));
                        break;
                    }
                    // A key inside a flow collection on this line.
                    if let Some(pos) = flow_key(c, k) {
                        hit = Some((j, ind as usize + pos, isize::MAX));
                        break;
                    }
                }
                let (j, col, key_indent) = hit?;
                found = Some((j + 1, col + 1));
                if key_indent == isize::MAX {
                    // Inside a flow collection: deeper steps stay on this line.
                    from = j;
                    to = j + 1;
                    parent = -1;
                } else {
                    from = j + 1;
                    to = block_end(j + 1, key_indent);
                    parent = key_indent;
                    // `key: {...}` or `key: [...]` on the same line: deeper steps are in that value. The key was
                    // found at the start of the line's body, so cutting after it is at a character boundary.
                    let c = content(lines[j]);
                    let body = c.strip_prefix("- ").unwrap_or(c);
                    let rest = body.get(pat.len()..).unwrap_or("").trim();
                    if rest.starts_with('{') || rest.starts_with('[') {
                        from = j;
                        to = j + 1;
                        parent = -1;
                    }
                }
            }
            Step::Index(n) => {
                // Block list items: `- ` at the first item's indentation.
                let mut count = 0;
                let mut item_indent = None;
                let mut hit = None;
                for (j, line) in lines.iter().enumerate().take(to).skip(from) {
                    let c = content(line);
                    if !c.starts_with("- ") && c != "-" {
                        continue;
                    }
                    let ind = indent(line);
                    if item_indent.is_some_and(|i| i != ind) {
                        continue;
                    }
                    item_indent = Some(ind);
                    if count == *n {
                        hit = Some((j, ind));
                        break;
                    }
                    count += 1;
                }
                // A flow list (`[...]`) has no dash lines: stay on the enclosing line.
                if let Some((j, ind)) = hit {
                    found = Some((j + 1, ind + 1));
                    from = j;
                    to = block_end(j + 1, ind as isize);
                    parent = ind as isize;
                }
            }
        }
    }
    // Columns count characters, not bytes.
    found.map(|(line, byte)| {
        let chars = lines[line - 1]
            .get(..byte - 1)
            .map_or(byte, |s| s.chars().count() + 1);
        (line, chars)
    })
}

/// The byte position of `key:` inside a flow mapping on a line (`{Name: a, Colour: red}`).
fn flow_key(line: &str, key: &str) -> Option<usize> {
    let pat = format!("{key}:");
    let mut start = 0;
    while let Some(i) = line[start..].find(&pat) {
        let at = start + i;
        let before = line[..at].trim_end().chars().last();
        if matches!(before, Some('{') | Some(',')) {
            return Some(at);
        }
        start = at + pat.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "\
SmartDevices:
  ResponseTimeout: fast
  Devices:
    - Name: A
      Model: X
      Outputs: [{Name: a, Colour: red}]
    - Name: B
      ID: 1.5
";

    #[test]
    fn block_and_flow_keys_are_found() {
        assert_eq!(locate(DOC, "SmartDevices.ResponseTimeout"), Some((2, 3)));
        assert_eq!(locate(DOC, "SmartDevices.Devices[1].ID"), Some((8, 7)));
        assert_eq!(locate(DOC, "SmartDevices.Devices[0].Model"), Some((5, 7)));
        assert_eq!(
            locate(DOC, "SmartDevices.Devices[0].Outputs[0].Colour"),
            Some((6, 27))
        );
        assert_eq!(locate(DOC, "SmartDevices.Devices[1]"), Some((7, 5)));
        assert_eq!(locate(DOC, "Nope.Key"), None);
        // Keys in any script: no cut inside a character, columns count characters.
        let doc = "éé:\n  ñ: 1\n  ü: [{ä: 2}]\n";
        assert_eq!(locate(doc, "éé.ü"), Some((3, 3)));
        assert_eq!(locate(doc, "éé.ü[0].ä"), Some((3, 8)));
        assert_eq!(locate(DOC, ""), None);
    }

    #[test]
    fn hostile_text_and_paths_never_panic() {
        let texts = [
            "",
            "\u{0}:\n\t- :\n",
            "a:\n- - - x\n  - [\n",
            "é: {é: [{é: é}]}\n😀:\n  - 😀: 1\n",
            "a: b: c:\n  :\n    - {,: :}\n",
        ];
        let paths = [
            "a",
            "a[0]",
            "a[99999999999999999999]",
            "é.é[0].é",
            "😀[0].😀",
            "[",
            "a.",
            ".[0]",
            "a[x]",
        ];
        for t in texts {
            for p in paths {
                let _ = locate(t, p);
            }
        }
    }
}
