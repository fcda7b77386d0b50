//! The `portcullis` binary: parse the command line, load the configuration,
//! start tracing, run.

use clap::Parser;
use portcullis::cli::person::PersonCommand;
use portcullis::cli::remote::{PersonEnv, RemoteArgs};
use portcullis::cli::{Cli, Command};
use portcullis::config::Config;
use std::process::ExitCode;

/// See the `mimalloc` entry in Cargo.toml for why.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("PORTCULLIS_LOG").unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal, not in a log file.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        // Each line about a request names it (its audit id).
        .event_format(portcullis::logs::Lines::default())
        .init();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("portcullis: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    match cli.command {
        Command::Certs { out, names } => portcullis::cli::generate_certs(&out, &names)?,
        #[cfg(feature = "demo")]
        Command::Demo { dir, listen } => runtime.block_on(portcullis::demo::run(&dir, &listen))?,
        Command::Serve => {
            let config = Config::load(&cli.config, std::env::vars())?;
            let store = portcullis::cli::open_store(&config)?;
            runtime.block_on(async {
                let app = portcullis::app::App::build(&config, store).await?;
                tracing::info!(addr = %app.local_addr(), "portcullis serving");
                app.run(portcullis::app::shutdown_signal()).await;
                anyhow::Ok(())
            })?;
        }
        Command::Whoami => person(&runtime, &cli.remote, PersonCommand::Whoami)?,
        Command::Access(c) => person(&runtime, &cli.remote, PersonCommand::Access(c))?,
        Command::Approvals(c) => person(&runtime, &cli.remote, PersonCommand::Approvals(c))?,
        Command::Credential(c) => person(&runtime, &cli.remote, PersonCommand::Credential(c))?,
        Command::Login { url, no_browser } => {
            let (env, ca) = (person_env(), cli.remote.ca_file.as_deref());
            let out = &mut std::io::stderr().lock();
            runtime.block_on(portcullis::cli::login::login(&url, ca, &env, !no_browser, out))?
        }
        Command::Logout => {
            let env = person_env();
            runtime.block_on(portcullis::cli::login::logout(&env, &mut std::io::stderr().lock()))?
        }
        Command::Kubeconfig => person(&runtime, &cli.remote, PersonCommand::Kubeconfig)?,
        Command::GroupRule(c) => person(&runtime, &cli.remote, PersonCommand::GroupRule(c))?,
        Command::Bot(c) => person(&runtime, &cli.remote, PersonCommand::Bot(c))?,
        Command::CiLogin {
            token_file,
            token_env,
            clusters,
            kubeconfig,
        } => runtime.block_on(ci_login(&cli.remote, token_file, token_env, clusters, kubeconfig))?,
        Command::CredentialPlugin => {
            let env = person_env();
            portcullis::cli::plugin::run(&cli.remote, &env, &mut std::io::stdout().lock())?
        }
        admin => {
            let config = Config::load(&cli.config, std::env::vars())?;
            portcullis::cli::admin(&config, admin)?;
        }
    }
    Ok(())
}

/// A person command, against the server; the environment is read here,
/// once.
fn person(runtime: &tokio::runtime::Runtime, remote: &RemoteArgs, command: PersonCommand) -> anyhow::Result<()> {
    let env = person_env();
    Ok(runtime.block_on(portcullis::cli::person::run(remote, &env, command))?)
}

/// `ci-login`: the token and the kubeconfig's path are read here, once.
async fn ci_login(
    remote: &RemoteArgs,
    token_file: Option<std::path::PathBuf>,
    token_env: Option<String>,
    clusters: Vec<String>,
    kubeconfig: Option<std::path::PathBuf>,
) -> anyhow::Result<()> {
    use portcullis::cli::ci_login::{self, CiLogin};
    let token = ci_login::read_token(token_file.as_deref(), token_env.as_deref(), |name| {
        std::env::var(name).ok()
    })?;
    let server = remote
        .server
        .clone()
        .ok_or_else(|| anyhow::anyhow!("say which portcullis with --server or PORTCULLIS_SERVER"))?;
    let kubeconfig = kubeconfig
        .or(person_env().kubeconfig)
        .ok_or_else(|| anyhow::anyhow!("neither --kubeconfig, KUBECONFIG nor HOME is set: nowhere to write"))?;
    let login = CiLogin {
        server,
        ca_file: remote.ca_file.clone(),
        token,
        clusters,
        kubeconfig,
    };
    Ok(ci_login::run(&login, &mut std::io::stderr().lock()).await?)
}

/// What the person commands read of the environment.
fn person_env() -> PersonEnv {
    let interactive = std::io::IsTerminal::is_terminal(&std::io::stdin());
    PersonEnv::from_vars(std::env::vars(), interactive)
}
