//! Compiles the estimator protos with protox (pure Rust: no system protoc) and generates
//! the prost messages and the tonic service.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "pkg/estimator/pb/estimator.proto",
        "pkg/estimator/service/service.proto",
        "k8s/core.proto",
        "k8s/quantity.proto",
    ];
    let fds = protox::compile(files, ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(fds)?;
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
