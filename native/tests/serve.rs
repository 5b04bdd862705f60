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

/// Sends `method path` (with a JSON body, if given) on loopback; returns the status and body.
fn http(port: u16, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    send(&mut s, method, path, body);
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok());
    (status.unwrap_or_else(|| panic!("{head}")), body.to_string())
}

fn send(s: &mut TcpStream, method: &str, path: &str, body: Option<&str>) {
    let body = body.unwrap_or("");
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
}

/// The body of `GET path` on loopback, which must answer 200.
fn http_get(port: u16, path: &str) -> String {
    let (status, body) = http(port, "GET", path, None);
    assert_eq!(status, 200, "GET {path}: {body}");
    body
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
    // The concurrent replies' steps ran batched.
    assert!(s.metric("tandem_batched_tokens_total") > 0.0);
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

/// A completion request that generates `max_tokens` whatever the model's end token says.
fn completion(max_tokens: u32, stream: bool) -> String {
    format!(
        r#"{{"prompt": "Once upon a time", "max_tokens": {max_tokens}, "temperature": 0, "ignore_eos": true, "stream": {stream}}}"#
    )
}

#[test]
fn lost_device_fails_replies_in_flight_reports_unhealthy_and_reloads() {
    let s = Server::start(&[
        "-m",
        &fixture("tiny-llama.gguf"),
        "--parallel",
        "2",
        "-c",
        "2048",
        "--debug-endpoints",
    ]);
    let port = s.port();
    assert_eq!(http_get(port, "/health"), r#"{"status":"ok"}"#);
    let (status, before) = http(
        port,
        "POST",
        "/v1/completions",
        Some(&completion(12, false)),
    );
    assert_eq!(status, 200, "{before}");
    let text = |body: &str| {
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        v["choices"][0]["text"].as_str().unwrap().to_string()
    };

    // Two replies in flight: one streamed (it has sent its first piece), one whole.
    let (first_piece, got_first) = std::sync::mpsc::channel();
    let streamed = std::thread::spawn(move || {
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        send(
            &mut c,
            "POST",
            "/v1/completions",
            Some(&completion(2000, true)),
        );
        let mut lines = BufReader::new(c).lines().map_while(Result::ok);
        let mut seen = String::new();
        for l in lines.by_ref() {
            let piece = l.starts_with("data: {") && l.contains("\"text\"");
            seen.push_str(&l);
            seen.push('\n');
            if piece {
                break;
            }
        }
        let _ = first_piece.send(());
        lines.for_each(|l| {
            seen.push_str(&l);
            seen.push('\n');
        });
        seen
    });
    let whole = std::thread::spawn(move || {
        http(
            port,
            "POST",
            "/v1/completions",
            Some(&completion(2000, false)),
        )
    });
    got_first
        .recv_timeout(Duration::from_secs(120))
        .expect("the streamed reply never started");
    let t0 = Instant::now();
    while s.metric("tandem_requests_running") < 2.0 {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the second reply never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }

    let (status, body) = http(port, "POST", "/debug/lose-device", None);
    assert_eq!(status, 200, "{body}");

    // Both fail with a clear error, the streamed one in its stream.
    let streamed = streamed.join().unwrap();
    let error_event = streamed
        .lines()
        .find(|l| l.starts_with("data: {\"error\""))
        .unwrap_or_else(|| panic!("no error event in the stream:\n{streamed}"));
    assert!(error_event.contains("GPU device was lost"), "{error_event}");
    assert!(!streamed.contains("[DONE]"), "{streamed}");
    let (status, body) = whole.join().unwrap();
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("GPU device was lost"), "{body}");
    assert!(body.contains("loading the model again"), "{body}");

    // Unhealthy, with the reason, until the model is loaded again on a new device.
    let (status, body) = http(port, "GET", "/health", None);
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("GPU device was lost (destroyed)"), "{body}");
    let t0 = Instant::now();
    loop {
        let (status, body) = http(port, "GET", "/health", None);
        if status == 200 {
            break;
        }
        assert_eq!(status, 503, "{body}");
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "still unhealthy after 120 s: {body}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!("healthy again after {:?}", t0.elapsed());
    assert_eq!(s.metric("tandem_device_losses_total"), 1.0);

    // And serves as before.
    let (status, after) = http(
        port,
        "POST",
        "/v1/completions",
        Some(&completion(12, false)),
    );
    assert_eq!(status, 200, "{after}");
    assert_eq!(text(&after), text(&before));
}
