//! Builds the C programs in `tests/c/` against `include/smartdev.h` and the static library with
//! `-std=c11 -Wall -Wextra -Werror`, runs them, and checks they report no failures. With `SD_SANITIZE=1`
//! (set by `.ci/run`) each program is also built and run with AddressSanitizer + UndefinedBehaviorSanitizer.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::TempDir;
use smartdev::ModelLibrary;
use smartdev::emulator::{DeviceSpec, Emulator, Fault};

const LINK: &[&str] = &["-pthread", "-ldl", "-lm", "-lrt", "-lutil", "-lgcc_s"];

/// The static library, built once per test run (`cargo test` itself only builds the rlib).
fn static_lib() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let lib = common::cargo_build(&["--lib"]).join("libsmartdev.a");
        assert!(lib.exists(), "{} is missing", lib.display());
        lib
    })
}

/// Compiles `tests/c/<name>.c` (optionally with sanitizers) into `dir`.
fn compile(name: &str, dir: &Path, sanitize: bool) -> PathBuf {
    let root = env!("CARGO_MANIFEST_DIR");
    let exe = dir.join(if sanitize {
        format!("{name}-san")
    } else {
        name.to_string()
    });
    let mut cmd = Command::new("cc");
    cmd.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-g"]);
    if sanitize {
        cmd.args([
            "-fsanitize=address,undefined",
            "-fno-omit-frame-pointer",
            "-fno-sanitize-recover=all",
        ]);
    }
    cmd.arg(format!("-I{root}/include"))
        .arg(format!("-I{root}/tests/c"))
        .arg(format!("{root}/tests/c/{name}.c"))
        .arg(static_lib())
        .args(LINK)
        .arg("-o")
        .arg(&exe);
    let out = cmd.output().expect("a C compiler (cc) is installed");
    assert!(
        out.status.success(),
        "compiling {name}.c failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Runs a compiled test program and checks its summary.
fn run(exe: &Path, env: &[(&str, String)]) {
    let mut cmd = Command::new(exe);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.env("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
        .env("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1");
    let out = cmd.output().expect("the test program runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains(" passed, 0 failed"),
        "{} failed ({:?}):\n{stdout}\n{stderr}",
        exe.display(),
        out.status
    );
}

/// A local port where nothing listens (bound once, then released), so connecting to it is refused.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Builds and runs a program; also with sanitizers when `SD_SANITIZE` is set.
fn each_build(name: &str, env: impl Fn(&TempDir) -> Vec<(&'static str, String)>) {
    let bin = TempDir::new(&format!("c-{name}"));
    let sanitized = std::env::var_os("SD_SANITIZE").is_some();
    for san in std::iter::once(false).chain(sanitized.then_some(true)) {
        let exe = compile(name, bin.path(), san);
        let work = TempDir::new(&format!("c-{name}-run"));
        run(&exe, &env(&work));
    }
}

#[test]
fn misuse_suite() {
    each_build("sd_api_misuse", |d| {
        vec![("SD_TEST_DIR", d.path().display().to_string())]
    });
}

#[test]
fn simulated_devices() {
    each_build("sd_int_simulated", |d| {
        vec![("SD_TEST_DIR", d.path().display().to_string())]
    });
}

#[test]
fn covers_sensors_and_unknown_states() {
    each_build("sd_int_covers", |d| {
        vec![
            ("SD_TEST_DIR", d.path().display().to_string()),
            ("SD_CLOSED_PORT", closed_port().to_string()),
        ]
    });
}

#[test]
fn an_unreachable_device_has_its_object() {
    each_build("sd_int_offline", |_| {
        vec![("SD_CLOSED_PORT", closed_port().to_string())]
    });
}

#[test]
fn many_threads_on_one_controller() {
    each_build("sd_int_threads", |d| {
        vec![("SD_TEST_DIR", d.path().display().to_string())]
    });
}

#[test]
fn log_callbacks_belong_to_their_controller() {
    each_build("sd_log_callbacks", |d| {
        vec![("SD_TEST_DIR", d.path().display().to_string())]
    });
}

#[test]
fn emulated_devices() {
    each_build("sd_int_emulated", |_| {
        // One emulator per run (the sanitizer run repeats the scenario from scratch).
        let mut locked = DeviceSpec::new("ShellyPlus1PM");
        locked.password = Some("right".into());
        let emu = Emulator::start(
            vec![
                DeviceSpec::new("Shelly2PMG3"),
                DeviceSpec::new("ShellyPlus1PM"),
                locked,
            ],
            &ModelLibrary::embedded(),
        )
        .unwrap();
        emu.set_fault(1, Fault::Blackhole);
        let env = vec![
            ("SD_EMU_PORT_0", emu.port(0).to_string()),
            ("SD_EMU_PORT_1", emu.port(1).to_string()),
            ("SD_EMU_PORT_2", emu.port(2).to_string()),
            ("SD_CLOSED_PORT", closed_port().to_string()),
        ];
        // The emulator must outlive the program run: leak it for the life of this test process.
        std::mem::forget(emu);
        env
    });
}

/// The README's C block is a complete program: it compiles with the strict flags and runs (on simulated
/// devices, in a temporary folder).
#[test]
fn the_readme_c_program_compiles_and_runs() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let start = readme.find("```c\n").expect("the README has a C block") + 5;
    let end = start + readme[start..].find("```").unwrap();
    let dir = TempDir::new("readme-c");
    let src = dir.write("readme.c", &readme[start..end]);
    let exe = dir.join("readme");
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror"])
        .arg(format!("-I{root}/include"))
        .arg(&src)
        .arg(static_lib())
        .args(LINK)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("a C compiler (cc) is installed");
    assert!(
        out.status.success(),
        "the README's C block does not compile:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(&exe).current_dir(dir.path()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("pump on, blind at 40 %"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
