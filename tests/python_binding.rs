//! Runs the Python binding's `unittest` suite (`bindings/python/tests`) against the shared library, with
//! `SMARTDEV_LIB` pointing at the freshly built `libsmartdev` and `SDCTL_BIN` at `sdctl` (for the emulator
//! tests). Needs `python3` (3.9 or later, standard library only); set `PYTHON` to use another interpreter.

use std::path::PathBuf;
use std::process::Command;

mod common;

/// The shared library (`cargo test` itself only builds the rlib).
fn shared_lib() -> PathBuf {
    let lib = common::cargo_build(&["--lib"]).join(format!(
        "{}smartdev{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    assert!(lib.exists(), "{} is missing", lib.display());
    lib
}

#[test]
fn python_unittest_suite() {
    let lib = shared_lib();
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(&python)
        .args(["-m", "unittest", "discover", "-v"])
        // -t puts bindings/python on sys.path, so the tests import the `smartdev` package from the tree.
        .args(["-s", "bindings/python/tests", "-t", "bindings/python"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("SMARTDEV_LIB", &lib)
        .env("SDCTL_BIN", env!("CARGO_BIN_EXE_sdctl"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run `{python}` ({e}): install Python 3.9+ or set PYTHON to an interpreter"
            )
        });
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the Python binding tests failed ({:?}):\n{stdout}\n{stderr}",
        out.status
    );
    // unittest reports on stderr; shown with `--nocapture`.
    eprintln!("{stdout}{stderr}");
    assert!(
        !stderr.contains("skipped 'SDCTL_BIN"),
        "the emulator tests were skipped"
    );
}
