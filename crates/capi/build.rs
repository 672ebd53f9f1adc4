// Gives libnumaff.so the soname libnumaff.so.MAJOR, so programs linked against an installed
// libnumaff.so (a symlink to libnumaff.so.MAJOR.MINOR.PATCH) keep working across compatible updates.
fn main() {
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "0".into());
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libnumaff.so.{major}");
    println!("cargo:rerun-if-changed=build.rs");
}
