//! "Did you mean" hints: the closest known word to a misspelled one (keys, event names, component names).

/// Edit distance between `a` and `b` (insertions, deletions, substitutions and swaps of neighbours, the
/// usual typos), ignoring ASCII case.
pub(crate) fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().map(|c| c.to_ascii_lowercase()).collect();
    let b: Vec<char> = b.chars().map(|c| c.to_ascii_lowercase()).collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j - 1] + cost)
                .min(d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// The candidate closest to `word`, if it is close enough to be a plausible typo (about one edit per four
/// characters, at least one). Ties go to the first candidate.
pub(crate) fn closest<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    // Long foreign words are not compared character by character: the hint is for typos, not essays.
    if word.chars().count() > 200 {
        return None;
    }
    let limit = (word.chars().count() / 4).max(1);
    candidates
        .into_iter()
        .filter(|c| c.chars().count() <= 200)
        .map(|c| (distance(word, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// `; did you mean 'X'?` for the closest candidate, or nothing.
pub(crate) fn hint<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    closest(word, candidates)
        .map(|c| format!("; did you mean '{c}'?"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_find_their_word_and_strangers_find_nothing() {
        let keys = ["ResponseTimeout", "RetryCount", "RetryDelay"];
        assert_eq!(closest("ResponseTimout", keys), Some("ResponseTimeout"));
        assert_eq!(closest("retrycount", keys), Some("RetryCount"));
        assert_eq!(closest("Website", keys), None);
        assert_eq!(
            hint("input.toggle_onn", ["input.toggle_on", "input.toggle_off"]),
            "; did you mean 'input.toggle_on'?"
        );
        assert_eq!(hint("x", ["input.toggle_on"]), "");
        assert_eq!(closest(&"a".repeat(10_000), keys), None);
    }
}
