//! The plainest idiomatic tokio echo server (tokio's own echo example: a task per connection that reads
//! into a buffer and writes back what it read), with what the peer benchmark needs around it: TCP_NODELAY
//! as every server in the comparison sets it, the listening line, and on SIGTERM the exit line with the
//! messages echoed (bytes / --msg-size) and the process's CPU time, the shape demux-server prints.
//!
//!     tokio-echo --port P [--msg-size B] [--bind ADDR] [--threads N]
//!
//! --threads 0 (the default) runs tokio's current_thread runtime; N > 0 the multi-thread runtime with N
//! workers. Built by bench/peers/peer_servers.py into build/peer/.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};

static ECHOED: AtomicU64 = AtomicU64::new(0);

struct Args {
    port: u16,
    msg_size: u64,
    bind: String,
    threads: usize,
}

fn usage(what: &str) -> ! {
    eprintln!("tokio-echo: {what} (usage: tokio-echo --port P [--msg-size B] [--bind ADDR] [--threads N])");
    std::process::exit(2)
}

fn parse() -> Args {
    let mut a = Args { port: 0, msg_size: 1, bind: "127.0.0.1".into(), threads: 0 };
    let mut it = std::env::args().skip(1);
    let mut port = None;
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| usage("an option without a value"));
        match flag.as_str() {
            "--port" => port = Some(value.parse().unwrap_or_else(|_| usage("bad --port"))),
            "--msg-size" => a.msg_size = value.parse().unwrap_or_else(|_| usage("bad --msg-size")),
            "--bind" => a.bind = value,
            "--threads" => a.threads = value.parse().unwrap_or_else(|_| usage("bad --threads")),
            _ => usage("unknown option"),
        }
    }
    a.port = port.unwrap_or_else(|| usage("missing --port"));
    if a.msg_size == 0 {
        usage("--msg-size must be >= 1");
    }
    a
}

fn cpu_seconds() -> (f64, f64) {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (s(ru.ru_utime), s(ru.ru_stime))
}

async fn serve(listener: TcpListener) {
    loop {
        let Ok((mut socket, _)) = listener.accept().await else { continue };
        let _ = socket.set_nodelay(true);
        tokio::spawn(async move {
            let mut buf = vec![0u8; 1024];
            loop {
                let n = match socket.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                if socket.write_all(&buf[..n]).await.is_err() {
                    return;
                }
                ECHOED.fetch_add(n as u64, Ordering::Relaxed);
            }
        });
    }
}

fn main() {
    let args = parse();
    let rt = if args.threads == 0 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(args.threads).enable_all().build()
    }
    .expect("tokio runtime");
    let started = Instant::now();
    rt.block_on(async {
        let listener = match TcpListener::bind((args.bind.as_str(), args.port)).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("tokio-echo: cannot listen on {}:{}: {e}", args.bind, args.port);
                std::process::exit(1)
            }
        };
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
        let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
        println!("{{\"event\": \"listening\", \"port\": {}}}", listener.local_addr().unwrap().port());
        tokio::select! {
            _ = serve(listener) => {}
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    });
    let (user, sys) = cpu_seconds();
    println!(
        "{{\"event\": \"exit\", \"server\": \"tokio\", \"runtime\": \"{}\", \"messages\": {}, \"elapsed_s\": {:.6}, \
         \"cpu_s\": {{\"user\": {user:.6}, \"sys\": {sys:.6}}}}}",
        if args.threads == 0 { "current_thread".to_string() } else { format!("multi_thread:{}", args.threads) },
        ECHOED.load(Ordering::Relaxed) / args.msg_size,
        started.elapsed().as_secs_f64(),
    );
    std::process::exit(0)
}
