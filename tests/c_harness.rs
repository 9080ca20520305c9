//! Builds the C programs in `tests/c/` against `include/smartdev.h` and the static library with
//! `-std=c11 -Wall -Wextra -Werror`, runs them, and checks they report no failures. With `SD_SANITIZE=1`
//! (set by `.ci/run`) each program is also built and run with AddressSanitizer + UndefinedBehaviorSanitizer.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::TempDir;
use smartdev::ModelLibrary;
use smartdev::emulator::{DeviceSpec, Emulator, Fault, FirmwareSpec};

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

/// Compiles `tests/c/<name>.c` (optionally with sanitizers) into `dir`, linked with the static library.
fn compile(name: &str, dir: &Path, sanitize: bool) -> PathBuf {
    let link: Vec<String> = std::iter::once(static_lib().display().to_string())
        .chain(LINK.iter().map(|s| s.to_string()))
        .collect();
    compile_with(name, dir, sanitize, &[], &link).0
}

/// Compiles `tests/c/<name>.c` with `-std=c11 -Wall -Wextra -Werror`, `flags` and the libraries `link`;
/// returns the program and the compiler's stderr (its warnings).
fn compile_with(
    name: &str,
    dir: &Path,
    sanitize: bool,
    flags: &[&str],
    link: &[String],
) -> (PathBuf, String) {
    let root = env!("CARGO_MANIFEST_DIR");
    let exe = dir.join(if sanitize {
        format!("{name}-san")
    } else {
        name.to_string()
    });
    let mut cmd = Command::new("cc");
    // Plain ASCII quotes in the compiler's messages (the warnings are checked).
    cmd.env("LC_ALL", "C");
    cmd.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-g"]);
    cmd.args(flags);
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
        .args(link)
        .arg("-o")
        .arg(&exe);
    let out = cmd.output().expect("a C compiler (cc) is installed");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "compiling {name}.c failed:\n{stderr}");
    (exe, stderr)
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
fn lights_are_set_and_refused_with_their_reasons() {
    each_build("sd_int_lights", |d| {
        vec![("SD_TEST_DIR", d.path().display().to_string())]
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

#[test]
fn a_foreign_device_at_the_address_gives_sd_wrong_device_and_is_not_switched() {
    let emus = std::sync::Mutex::new(Vec::new());
    each_build("sd_int_wrong_device", |_| {
        let mut foreign = DeviceSpec::new("ShellyPlus1PM");
        foreign.mac = Some("11:22:33:44:55:66".into());
        let emu = Emulator::start(vec![foreign], &ModelLibrary::embedded()).unwrap();
        let env = vec![("SD_EMU_PORT_0", emu.port(0).to_string())];
        emus.lock().unwrap().push(emu);
        env
    });
    for emu in emus.into_inner().unwrap() {
        assert!(!emu.output(0, 0), "the foreign device was switched");
    }
}

/// HTTPS devices from C: pinned, refused (pinned to another device's certificate), trusted at first use.
#[test]
fn https_devices_are_verified_refused_and_pinned_at_first_use() {
    let emus = std::sync::Mutex::new(Vec::new());
    each_build("sd_int_tls", |d| {
        let spec = || {
            let mut s = DeviceSpec::new("ShellyPlus1PM");
            s.tls = true;
            s
        };
        let emu = Emulator::start(vec![spec(), spec(), spec()], &ModelLibrary::embedded()).unwrap();
        let mut env = vec![("SD_TEST_DIR", d.path().display().to_string())];
        for (i, (port, fp)) in [
            ("SD_EMU_PORT_0", "SD_EMU_FP_0"),
            ("SD_EMU_PORT_1", "SD_EMU_FP_1"),
            ("SD_EMU_PORT_2", "SD_EMU_FP_2"),
        ]
        .into_iter()
        .enumerate()
        {
            env.push((port, emu.port(i).to_string()));
            env.push((fp, emu.certificate_sha256(i).unwrap()));
        }
        emus.lock().unwrap().push(emu);
        env
    });
    for emu in emus.into_inner().unwrap() {
        assert!(emu.output(0, 0), "the pinned device was not switched");
        assert!(!emu.output(1, 0), "the refused device was switched");
    }
}

#[test]
fn get_device_reads_and_reports_the_error_with_the_object() {
    each_build("sd_int_get_device", |d| {
        let emu = Emulator::start(
            vec![
                DeviceSpec::new("ShellyPlus1PM"),
                DeviceSpec::new("Shelly1PMG3"),
            ],
            &ModelLibrary::embedded(),
        )
        .unwrap();
        emu.set_fault(1, Fault::Blackhole);
        let env = vec![
            ("SD_TEST_DIR", d.path().display().to_string()),
            ("SD_EMU_PORT_0", emu.port(0).to_string()),
            ("SD_EMU_PORT_1", emu.port(1).to_string()),
            ("SD_CLOSED_PORT", closed_port().to_string()),
        ];
        // The emulator must outlive the program run: leak it for the life of this test process.
        std::mem::forget(emu);
        env
    });
}

#[test]
fn firmware_checks_and_updates() {
    each_build("sd_int_firmware", |d| {
        let mut kitchen = DeviceSpec::new("ShellyPlus1PM");
        kitchen.firmware = FirmwareSpec {
            version: Some("1.4.4".into()),
            stable: Some("1.5.0".into()),
            download: std::time::Duration::from_millis(100),
            restart: std::time::Duration::from_millis(300),
            ..FirmwareSpec::default()
        };
        let mut hall = DeviceSpec::new("ShellyPlus1PM");
        hall.firmware.version = Some("1.4.4".into());
        // Attic is followed by a progress callback: a restart long enough that the controller's first look
        // (200 ms after the request) finds it offline even on a loaded machine, so Restarting is always seen.
        // Its download of 1 s: the device tells each tenth over its WebSocket, the first ones long before the
        // restart.
        let mut attic = DeviceSpec::new("ShellyPlus1PM");
        attic.firmware = FirmwareSpec {
            download: std::time::Duration::from_millis(1000),
            restart: std::time::Duration::from_millis(1500),
            ..kitchen.firmware.clone()
        };
        // Cellar: the progress export with a NULL callback.
        let cellar = kitchen.clone();
        let emu = Emulator::start(
            vec![kitchen, hall, attic, cellar],
            &ModelLibrary::embedded(),
        )
        .unwrap();
        let env = vec![
            ("SD_TEST_DIR", d.path().display().to_string()),
            ("SD_EMU_PORT_0", emu.port(0).to_string()),
            ("SD_EMU_PORT_1", emu.port(1).to_string()),
            ("SD_EMU_PORT_2", emu.port(2).to_string()),
            ("SD_EMU_PORT_3", emu.port(3).to_string()),
        ];
        // The emulator must outlive the program run: leak it for the life of this test process.
        std::mem::forget(emu);
        env
    });
}

#[test]
fn energy_history_as_json() {
    each_build("sd_int_energy", |d| {
        let clock = smartdev::emulator::EmuClock::manual();
        let specs = vec![
            DeviceSpec::new("ShellyProEM50"),
            DeviceSpec::new("ShellyPlus1PM"),
        ];
        let emu =
            Emulator::start_with_clock(specs, &ModelLibrary::embedded(), clock.clone()).unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        clock.advance(std::time::Duration::from_secs(3 * 3600));
        let env = vec![
            ("SD_TEST_DIR", d.path().display().to_string()),
            ("SD_EMU_PORT_0", emu.port(0).to_string()),
            ("SD_EMU_PORT_1", emu.port(1).to_string()),
            ("SD_FROM", ((now / 3600 + 2) * 3600).to_string()),
        ];
        // The emulator must outlive the program run: leak it for the life of this test process.
        std::mem::forget(emu);
        env
    });
}

/// The soname the shared library must carry: `libsmartdev.so.0.MINOR` before 1.0 (semver: a 0.x minor
/// release may break the ABI), `libsmartdev.so.MAJOR` after.
fn soname() -> String {
    let (major, minor) = (
        env!("CARGO_PKG_VERSION_MAJOR"),
        env!("CARGO_PKG_VERSION_MINOR"),
    );
    if major == "0" {
        format!("libsmartdev.so.0.{minor}")
    } else {
        format!("libsmartdev.so.{major}")
    }
}

/// `readelf -d` of a file (dynamic section), or None when readelf is not installed.
fn dynamic_section(file: &Path) -> Option<String> {
    let out = Command::new("readelf").arg("-d").arg(file).output().ok()?;
    assert!(out.status.success(), "readelf -d {} failed", file.display());
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The shared library of this build, with `libsmartdev.so` and its soname as symlinks in `dir` (what
/// `bindings/c/install.sh` installs), so a program linked with `-L dir -lsmartdev` and an rpath to `dir`
/// finds `libsmartdev.so.<ABI>` at run time.
fn shared_lib_in(dir: &Path) -> PathBuf {
    let built = static_lib().with_file_name("libsmartdev.so");
    assert!(built.exists(), "{} is missing", built.display());
    for link in ["libsmartdev.so".to_string(), soname()] {
        std::os::unix::fs::symlink(&built, dir.join(link)).unwrap();
    }
    built
}

#[test]
fn the_shared_library_carries_its_abi_soname() {
    let built = static_lib().with_file_name("libsmartdev.so");
    let Some(dynamic) = dynamic_section(&built) else {
        eprintln!("readelf is not installed: soname not checked here (.ci/run checks it)");
        return;
    };
    assert!(
        dynamic.contains(&format!("Library soname: [{}]", soname())),
        "{} has no soname {}:\n{dynamic}",
        built.display(),
        soname()
    );
}

/// A program written against the 0.1.0 header, with only the 0.1.0 names, compiles with deprecation warnings
/// only (each naming its replacement), links the shared library (asking for its soname) and runs correctly.
#[test]
fn old_names_compile_with_deprecation_warnings_and_run_against_the_shared_library() {
    let bin = TempDir::new("c-old-names");
    shared_lib_in(bin.path());
    let lib_dir = bin.path().display().to_string();
    let link = vec![
        format!("-L{lib_dir}"),
        format!("-Wl,-rpath,{lib_dir}"),
        "-lsmartdev".to_string(),
    ];
    let sanitized = std::env::var_os("SD_SANITIZE").is_some();
    for san in std::iter::once(false).chain(sanitized.then_some(true)) {
        let (exe, warnings) = compile_with(
            "sd_old_names",
            bin.path(),
            san,
            &["-Wno-error=deprecated-declarations"],
            &link,
        );
        for (old, new) in [
            ("sd_get_devices", "renamed sd_devices"),
            ("sd_get_output_state", "renamed sd_output_state"),
            ("sd_get_input_state", "renamed sd_input_state"),
            ("sd_get_meter", "renamed sd_meter"),
            ("sd_get_device_online", "renamed sd_is_device_online"),
        ] {
            assert!(
                warnings.contains(&format!("'{old}' is deprecated: {new}")),
                "no deprecation warning for {old} naming its replacement:\n{warnings}"
            );
        }
        // The spec's names are first-class, never deprecated.
        for name in ["sd_get_device'", "sd_get_device_component'"] {
            assert!(
                !warnings.contains(name),
                "{name} must not be deprecated:\n{warnings}"
            );
        }
        if let Some(dynamic) = dynamic_section(&exe) {
            assert!(
                dynamic.contains(&format!("Shared library: [{}]", soname())),
                "the program does not ask for {}:\n{dynamic}",
                soname()
            );
        }
        let work = TempDir::new("c-old-names-run");
        run(&exe, &[("SD_TEST_DIR", work.path().display().to_string())]);
    }
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

/// `smartdev.h` is usable from C++ (its `extern "C"` guards, no C-only constructs): the C++ quick start of
/// `examples/cmake` compiles with `-std=c++17 -Wall -Wextra -Werror -pedantic`, links the static library and
/// runs. Skipped (saying so) when no C++ compiler is installed, except under CI (`.ci/run` installs g++).
#[test]
fn the_header_compiles_as_cpp_and_the_cpp_quickstart_runs() {
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    if Command::new(&cxx).arg("--version").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "no C++ compiler ({cxx}) under CI"
        );
        eprintln!(
            "no C++ compiler ({cxx}): the header's C++ use is not checked here (.ci/run checks it)"
        );
        return;
    }
    let root = env!("CARGO_MANIFEST_DIR");
    let dir = TempDir::new("cpp-quickstart");
    let sanitized = std::env::var_os("SD_SANITIZE").is_some();
    for san in std::iter::once(false).chain(sanitized.then_some(true)) {
        let exe = dir.join(if san {
            "quickstart_cpp-san"
        } else {
            "quickstart_cpp"
        });
        let mut cmd = Command::new(&cxx);
        cmd.env("LC_ALL", "C").args([
            "-std=c++17",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-g",
        ]);
        if san {
            cmd.args([
                "-fsanitize=address,undefined",
                "-fno-omit-frame-pointer",
                "-fno-sanitize-recover=all",
            ]);
        }
        let out = cmd
            .arg(format!("-I{root}/include"))
            .arg(format!("{root}/examples/cmake/quickstart.cpp"))
            .arg(static_lib())
            .args(LINK)
            .arg("-o")
            .arg(&exe)
            .output()
            .expect("the C++ compiler runs");
        assert!(
            out.status.success(),
            "examples/cmake/quickstart.cpp does not compile as C++17:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // A fresh folder per run: the program toggles the pump, starting from the simulation file's "off".
        let work = TempDir::new("cpp-quickstart-run");
        let out = Command::new(&exe)
            .current_dir(work.path())
            .env("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
            .env("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success()
                && stdout.contains("Pool Pump is now on (changed)")
                && stdout.contains("as expected: sd_output_state failed (SD_NOT_FOUND)"),
            "{} ({:?}):\n{stdout}\n{}",
            exe.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
