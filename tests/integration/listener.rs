//! A loopback HTTP listener that records every request it receives and answers each with what
//! its `answer` function says: the stand-in for a host a client must never be sent to (the
//! test asserts it received nothing, no credential in particular), or a server that redirects.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Answer = Box<dyn Fn(&str) -> Vec<u8> + Send + Sync>;

pub struct Listener {
    pub port: u16,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Listener {
    /// Listens on 127.0.0.1 at a free port; `answer` gets each request's head (request line
    /// and headers) and returns the whole response.
    pub fn start(answer: impl Fn(&str) -> Vec<u8> + Send + Sync + 'static) -> Listener {
        let socket = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = socket.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&requests);
        let answer: Arc<Answer> = Arc::new(Box::new(answer));
        std::thread::spawn(move || {
            for stream in socket.incoming().flatten() {
                let (seen, answer) = (Arc::clone(&seen), Arc::clone(&answer));
                std::thread::spawn(move || serve(stream, &seen, &answer));
            }
        });
        Listener { port, requests }
    }

    /// The heads of the requests received so far.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

fn serve(mut stream: TcpStream, seen: &Mutex<Vec<String>>, answer: &Answer) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    loop {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            match stream.read(&mut byte) {
                Ok(1) => head.push(byte[0]),
                _ => return,
            }
            if head.len() > 64 * 1024 {
                return;
            }
        }
        let head = String::from_utf8_lossy(&head).to_string();
        seen.lock().unwrap().push(head.clone());
        if stream.write_all(&answer(&head)).is_err() {
            return;
        }
    }
}

/// The path of a request head (`GET /a/b HTTP/1.1` -> `/a/b`).
pub fn path(head: &str) -> &str {
    head.split_whitespace().nth(1).unwrap_or("")
}

pub fn response(status: &str, headers: &[(&str, String)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status}\r\ncontent-length: {}\r\n", body.len());
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    let mut out = out.into_bytes();
    out.extend_from_slice(body);
    out
}
