//! The `tavern` command line. See [`cli`] for the subcommands and how to add one.

mod cli;

/// Opt-in (`--features mimalloc`); see BENCHMARKS.md, whole-process figures.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

fn main() -> ExitCode {
    cli::install_panic_hook();
    // Help and version print to stdout and exit 0; usage errors print to stderr and exit 2.
    let args = cli::Cli::try_parse().unwrap_or_else(|e| e.exit());
    cli::init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("tavern: cannot start the async runtime: {e}");
            return ExitCode::from(cli::INTERNAL);
        }
    };
    // The panic hook only prints; a panic the containment did not catch ends up here.
    let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        runtime.block_on(args.run())
    }))
    .unwrap_or(cli::INTERNAL);
    // A stuck plugin task must not keep the process alive after the answer is printed.
    runtime.shutdown_timeout(Duration::from_secs(1));
    ExitCode::from(code)
}
