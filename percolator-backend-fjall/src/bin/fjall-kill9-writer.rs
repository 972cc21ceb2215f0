//! The child process of the SIGKILL test (`tests/crash_kill9.rs`): writes batches to the fjall
//! database at the path given as its one argument until it is killed (see
//! `percolator_backend_fjall::kill9`).

use std::process::ExitCode;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1) else {
        eprintln!("usage: fjall-kill9-writer DIR");
        return ExitCode::from(2);
    };
    percolator_backend_fjall::kill9::write_until_killed(std::path::Path::new(&dir)).await;
    ExitCode::SUCCESS
}
