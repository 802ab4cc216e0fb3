//! `distlock-verify`: the controller (see the library's docs), or with `client` first, one
//! client process of a run.

use std::time::Duration;

use distlock_verify::args::{Args, Control, Topology, USAGE};
use distlock_verify::guarded::Writes;
use distlock_verify::history::{Event, HistoryWriter};
use distlock_verify::http::ports::Ports;
use distlock_verify::register::Registers;
use distlock_verify::workload::{self, ClientConfig};
use distlock_verify::{controller, topology};

fn main() {
    let mut words: Vec<String> = std::env::args().skip(1).collect();
    let client_mode = words.first().is_some_and(|w| w == "client");
    if client_mode {
        words.remove(0);
    }
    let args = Args::parse(words).unwrap_or_else(|e| fail(&e));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a Tokio runtime");
    let passed = if client_mode {
        runtime.block_on(client(&args)).unwrap_or_else(|e| fail(&e));
        true
    } else {
        runtime
            .block_on(controller::run(&args))
            .unwrap_or_else(|e| fail(&e))
    };
    // The servers' and clients' handles are dropped with the runtime's tasks: exit after.
    drop(runtime);
    std::process::exit(if passed { 0 } else { 1 });
}

fn fail(message: &str) -> ! {
    eprintln!("distlock-verify: {message}\n{USAGE}");
    std::process::exit(2)
}

async fn client(args: &Args) -> Result<(), String> {
    let topology: Topology = args.need("topology")?;
    let urls: Vec<String> = args
        .need::<String>("urls")?
        .split(',')
        .map(String::from)
        .collect();
    let control: Option<Control> = args.get("control").map(str::parse).transpose()?;
    let proc: u32 = args.need("proc")?;
    let history =
        HistoryWriter::create(&args.path("history").ok_or("--history is required")?, proc)
            .map_err(|e| e.to_string())?;
    let client = topology::client(topology, &urls).map_err(|e| e.to_string())?;
    history.log(
        0,
        Event::ClientId {
            id: client.id().to_owned(),
        },
    );
    let registers = Registers::connect(
        &args.need::<String>("resource")?,
        control != Some(Control::Unfenced),
    )
    .await
    .map_err(|e| e.to_string())?;
    let config = ClientConfig {
        proc,
        seed: args.need("seed")?,
        tasks: args.or("tasks", 4)?,
        control,
        family: topology != Topology::Redlock,
        ports: args.path("ports").map(Ports::new),
        guarded: Writes::of(topology, &urls, control),
    };
    // The controller closes stdin to stop the client.
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        let _ = tx.send(());
    });
    let stop = async {
        let _ = rx.await;
    };
    let limit = Duration::from_secs(args.need("limit")?);
    workload::run(client, registers, history, config, stop, limit).await;
    Ok(())
}
