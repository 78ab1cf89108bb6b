//! The `tilemm` command line: a thin layer over the `tilemm` library. `args` parses,
//! `commands` calls the library and prints, and this file dispatches and sets exit codes.

use std::fmt;
use std::io::{self, Write as _};
use std::process::ExitCode;

use clap::Parser;
use tilemm::one_line;

use crate::args::{Cli, Command};

mod args;
mod plot;

/// Why a command stopped.
pub(crate) enum Failure {
    /// The request could not be run.
    Tilemm(tilemm::Error),
    /// The lab could not read or write a file, measure a peer, or generate or compile code.
    Lab(tilemm_lab::Error),
    /// Arguments that contradict each other.
    Usage(String),
    /// The plot could not be prepared or written.
    Plot(String),
    /// A panic: a bug, tilemm's or a dependency's.
    Internal(String),
    /// Standard output could not be written.
    Stdout(io::Error),
}

impl From<tilemm::Error> for Failure {
    fn from(e: tilemm::Error) -> Self {
        Failure::Tilemm(e)
    }
}

impl From<tilemm_lab::Error> for Failure {
    fn from(e: tilemm_lab::Error) -> Self {
        match e {
            tilemm_lab::Error::Tilemm(e) => Failure::Tilemm(e),
            other => Failure::Lab(other),
        }
    }
}

pub(crate) type CommandResult = Result<ExitCode, Failure>;

/// Writes a line to stdout. A failed write (a full disk, `> /dev/full`) stops the command; a
/// closed pipe (`| head -1`) stops it quietly.
pub(crate) fn say(line: fmt::Arguments) -> Result<(), Failure> {
    let mut out = io::stdout().lock();
    out.write_fmt(line)
        .and_then(|()| out.write_all(b"\n"))
        .map_err(Failure::Stdout)
}

macro_rules! say {
    ($($arg:tt)*) => {
        $crate::say(format_args!($($arg)*))?
    };
}

// After `say!`, which the commands use.
mod commands;

/// One line on stderr; if even that fails there is nobody left to tell.
pub(crate) fn complain(message: &str) {
    let _ = writeln!(io::stderr(), "tilemm: {}", one_line(message));
}

/// Exit codes: 0 verified, 1 the result failed verification, 2 the request could not be run.
pub(crate) const EXIT_FAIL: u8 = 1;
pub(crate) const EXIT_ERROR: u8 = 2;

/// ^C (or SIGTERM): the partial `--out` file, if one is being written, is removed, and the
/// process ends by the signal itself, its default action restored (a shell reports 130 for
/// ^C, and a script running tilemm stops as for any program ^C ends). Only async-signal-safe
/// calls: `unlink`, `signal` and `raise`.
extern "C" fn interrupted(signal: libc::c_int) {
    tilemm_lab::inputs::remove_partial_output();
    // SAFETY: the default action, then the signal again: delivered when this handler returns
    // (it is blocked while the handler runs), it ends the process.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
}

fn main() -> ExitCode {
    // A write past a file-size limit (`ulimit -f`) is then an error tilemm reports, not a
    // signal that kills it half-way through writing --out.
    #[cfg(unix)]
    // SAFETY: ignoring a signal installs no handler code; `interrupted` is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        let handler: extern "C" fn(libc::c_int) = interrupted;
        libc::signal(libc::SIGINT, handler as libc::sighandler_t);
        libc::signal(libc::SIGTERM, handler as libc::sighandler_t);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) if !err.use_stderr() => {
            // --help, --version.
            return match write!(io::stdout(), "{}", err.render())
                .and_then(|()| io::stdout().flush())
            {
                Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
                    complain(&format!("error: cannot write to standard output: {e}"));
                    ExitCode::from(EXIT_ERROR)
                }
                _ => ExitCode::SUCCESS,
            };
        }
        Err(err) => {
            // clap's message spans several lines; tilemm's errors are one line each.
            let text = err.render().to_string();
            let text: String = text
                .lines()
                .filter(|l| !l.trim_start().starts_with("For more information"))
                .collect::<Vec<_>>()
                .join("\n");
            complain(&text);
            return ExitCode::from(EXIT_ERROR);
        }
    };
    // A panic (a bug, or a dependency's) is one line on stderr and exit 2, like any refusal:
    // the hook keeps its message and place, and the command is caught where it unwinds to.
    std::panic::set_hook(Box::new(|info| {
        let message = tilemm::panic_message(info.payload());
        let place = info
            .location()
            .map(|l| format!(" at {l}"))
            .unwrap_or_default();
        if std::thread::current().name() == Some("main") {
            *PANIC.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("{message}{place}"));
        } else {
            // A runtime's own thread, which its runtime catches: said, in one line.
            complain(&format!("note: a runtime thread stopped: {message}{place}"));
        }
    }));
    let result = std::panic::catch_unwind(|| dispatch(cli.command)).unwrap_or_else(|payload| {
        // The hook's record has the place; a panic resumed from another thread has only its
        // payload.
        let what = PANIC.lock().unwrap_or_else(|e| e.into_inner()).take();
        Err(Failure::Internal(
            what.unwrap_or_else(|| tilemm::panic_message(&*payload)),
        ))
    });
    let result =
        result.and_then(|code| io::stdout().flush().map(|()| code).map_err(Failure::Stdout));
    match result {
        Ok(code) => code,
        // Whoever closed the pipe has read what they wanted.
        Err(Failure::Stdout(e)) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(Failure::Stdout(e)) => {
            complain(&format!("error: cannot write to standard output: {e}"));
            ExitCode::from(EXIT_ERROR)
        }
        Err(Failure::Tilemm(err)) => {
            // The library names the cargo feature; the command line says how to build it.
            let rebuild = match &err {
                tilemm::Error::NotBuilt { feature, .. } => {
                    format!(" (rebuild: cargo build --release -p tilemm-cli --features {feature})")
                }
                _ => String::new(),
            };
            complain(&format!("error: {err}{rebuild}"));
            ExitCode::from(EXIT_ERROR)
        }
        Err(Failure::Lab(err)) => {
            complain(&format!("error: {err}"));
            ExitCode::from(EXIT_ERROR)
        }
        Err(Failure::Usage(message) | Failure::Plot(message)) => {
            complain(&format!("error: {message}"));
            ExitCode::from(EXIT_ERROR)
        }
        Err(Failure::Internal(message)) => {
            complain(&format!(
                "error: internal error (please report it): {message}"
            ));
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// The last panic's message and place, for the one line that reports it.
static PANIC: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

fn dispatch(command: Command) -> Result<ExitCode, Failure> {
    match command {
        Command::Run(args) => commands::run::run_command(args),
        Command::Bench(args) => commands::bench::bench_command(args),
        Command::Tune(args) => commands::tune::tune_command(args),
        Command::Devices { json } => commands::devices::devices_command(json),
        Command::CompileCheck(args) => commands::compile_check::compile_check_command(args),
        Command::Emit {
            kernel,
            target,
            tpb,
            dtype,
        } => commands::emit::emit_command(kernel, target, tpb, dtype),
    }
}
