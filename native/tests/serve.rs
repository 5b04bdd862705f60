//! `tandem serve` with real clients: the official `openai` Python package (scripts/test.sh
//! installs it in a venv and names that venv's python in `TANDEM_TEST_PYTHON`), a load test of
//! concurrent streams, SIGTERM in the middle of a reply, and two servers behind nginx. The
//! client scripts are in tests/serve/.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn fixture(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(name);
    p.to_str().unwrap().to_string()
}

/// A `tandem serve` on a free loopback port, killed when dropped.
struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT`
    base: String,
}

impl Server {
    fn start(args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tandem"))
            .args(["serve", "-q", "--port", "0"])
            .args(args)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let base = loop {
            let Some(Ok(line)) = lines.next() else {
                let status = child.wait().unwrap();
                panic!("tandem serve {args:?} ended before listening: {status}");
            };
            eprintln!("[serve] {line}");
            if let Some(at) = line.find("http://") {
                let url = &line[at..];
                break url[..url.find(' ').unwrap_or(url.len())].to_string();
            }
        };
        // Keep reading its stderr, so the server never blocks on a full pipe.
        std::thread::spawn(move || {
            lines
                .map_while(Result::ok)
                .for_each(|l| eprintln!("[serve] {l}"))
        });
        Server { child, base }
    }

    fn port(&self) -> u16 {
        self.base.rsplit(':').next().unwrap().parse().unwrap()
    }

    /// The value of a metric without labels, or of one labelled series (`name{label="v"}`).
    fn metric(&self, series: &str) -> f64 {
        let text = http_get(self.port(), "/metrics");
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or(0.0)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The body of `GET path` on loopback.
fn http_get(port: u16, path: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    assert!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "{head}"
    );
    body.to_string()
}

/// Runs a client script from tests/serve/ with the test venv's python; it must succeed.
fn python(script: &str, args: &[String]) {
    let python = std::env::var("TANDEM_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/serve")
        .join(script);
    let t0 = Instant::now();
    let out = Command::new(&python)
        .arg(&path)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {python} ({e}); scripts/test.sh makes a venv with the openai package"
            )
        });
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "{script} {args:?} failed ({}); if openai is missing, run scripts/test.sh, which installs it\n{stdout}\n{stderr}",
        out.status
    );
    eprintln!("{stdout}{script}: {:.1} s", t0.elapsed().as_secs_f64());
}

#[test]
fn openai_client_streamed_whole_stops_budgets_and_errors() {
    let s = Server::start(&[
        "--api-key",
        "sekrit",
        "-c",
        "256",
        "--parallel",
        "2",
        "--queue",
        "0",
    ]);
    python(
        "client.py",
        &[s.base.clone(), "sekrit".into(), "256".into()],
    );
}

/// `load.py`'s arguments after the server's address.
fn load_args(base: &str, args: &[&str]) -> Vec<String> {
    std::iter::once(base)
        .chain(args.iter().copied())
        .map(String::from)
        .collect()
}

#[test]
fn thirty_two_concurrent_streams_equal_each_prompt_alone_with_flat_memory() {
    let s = Server::start(&[
        "-m",
        &fixture("tiny-llama.gguf"),
        "--parallel",
        "8",
        "--queue",
        "32",
    ]);
    let pid = s.child.id().to_string();
    let args = [
        "--text",
        "--clients",
        "32",
        "--requests",
        "3",
        "--rounds",
        "4",
        "--max-tokens",
        "24",
        "--pid",
        &pid,
    ];
    python("load.py", &load_args(&s.base, &args));
}

#[test]
fn concurrent_chat_streams_on_the_default_model_equal_each_alone() {
    let s = Server::start(&["--parallel", "4", "-c", "512"]);
    python(
        "load.py",
        &load_args(
            &s.base,
            &[
                "--clients",
                "4",
                "--requests",
                "1",
                "--rounds",
                "1",
                "--max-tokens",
                "6",
            ],
        ),
    );
}

#[test]
fn sigterm_lets_the_reply_in_flight_finish() {
    let mut s = Server::start(&["-m", &fixture("tiny-llama.gguf")]);
    python("sigterm.py", &[s.base.clone(), s.child.id().to_string()]);
    let t0 = Instant::now();
    loop {
        if let Some(status) = s.child.try_wait().unwrap() {
            assert!(
                status.success(),
                "tandem serve exited with {status} after SIGTERM"
            );
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "still running 60 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// nginx from Debian (.ci/run installs it), in the foreground with its files in `dir`.
struct Nginx(Child);

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn two_servers_behind_nginx_round_robin_with_streaming() {
    let tiny = fixture("tiny-llama.gguf");
    let backends = [0, 1].map(|_| Server::start(&["-m", &tiny, "--parallel", "4"]));
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = std::env::temp_dir().join(format!("tandem-nginx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = format!(
        include_str!("serve/nginx.conf"),
        dir = dir.display(),
        port = port,
        a = backends[0].port(),
        b = backends[1].port()
    );
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    let nginx = ["nginx", "/usr/sbin/nginx"]
        .iter()
        .find_map(|bin| {
            Command::new(bin)
                .args(["-e", "stderr", "-p"])
                .arg(&dir)
                .args(["-c", "nginx.conf", "-g", "daemon off;"])
                .spawn()
                .ok()
        })
        .map(Nginx)
        .expect("nginx is not installed (apt-get install nginx; .ci/run does)");
    let t0 = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "nginx did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let base = format!("http://127.0.0.1:{port}");
    let args = [
        "--text",
        "--clients",
        "8",
        "--requests",
        "2",
        "--rounds",
        "2",
        "--max-tokens",
        "16",
    ];
    python("load.py", &load_args(&base, &args));
    for b in &backends {
        assert!(
            b.metric("tandem_completion_tokens_total") > 0.0,
            "nginx sent no request to {}",
            b.base
        );
    }
    drop(nginx);
    let _ = std::fs::remove_dir_all(&dir);
}
