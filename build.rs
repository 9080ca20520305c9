//! Gives the shared library (cdylib) an soname carrying its ABI version, so a program linked against
//! smartdev 0.2 asks the dynamic loader for `libsmartdev.so.0.2` and never silently runs against an
//! incompatible release. Semver for 0.x: every minor release may break the ABI, so the soname is
//! `libsmartdev.so.0.MINOR`; from 1.0 on it is `libsmartdev.so.MAJOR`. `bindings/c/install.sh` installs
//! `libsmartdev.so.X.Y.Z` with the `libsmartdev.so.<ABI>` and `libsmartdev.so` symlinks. Linux (ELF) only.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os != "linux" {
        return;
    }
    let major =
        std::env::var("CARGO_PKG_VERSION_MAJOR").expect("cargo sets CARGO_PKG_VERSION_MAJOR");
    let minor =
        std::env::var("CARGO_PKG_VERSION_MINOR").expect("cargo sets CARGO_PKG_VERSION_MINOR");
    let abi = if major == "0" {
        format!("0.{minor}")
    } else {
        major
    };
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libsmartdev.so.{abi}");
}
