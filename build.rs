//! Does nothing at build time. It exists so that `[build-dependencies]` in Cargo.toml count:
//! they give the build-time side of this crate's dependency graph the features that the Python
//! package's (python/) has, so that one target directory builds Lance and Ballista once for
//! both (Cargo.toml says which).
fn main() {
    println!("cargo::rerun-if-changed=build.rs");
}
