//! The namespace through the CLI, and clear one-line errors for bad input.

mod common;
use common::{data, Pool, BIN};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

#[test]
fn namespace_commands_behave_like_a_file_system() {
    let pool = Pool::start(2, "32MiB", "64MiB");
    pool.ok(&["mkdir", "-p", "/x/y/z"]);
    pool.ok(&["mkdir", "-p", "/x/y"]);
    pool.put("/x/f", b"hello");
    assert_eq!(pool.ok(&["ls", "/x"]), "f\ny/\n");
    let ls: serde_json::Value = serde_json::from_str(&pool.ok(&["ls", "--json", "/x"])).unwrap();
    assert_eq!(ls[0]["name"], "f");
    assert_eq!(ls[0]["size"], 5);
    assert_eq!(ls[1]["kind"], "dir");
    let st: serde_json::Value = serde_json::from_str(&pool.ok(&["stat", "--json", "/x/f"])).unwrap();
    assert_eq!((st["kind"].as_str(), st["size"].as_u64(), st["priority"].as_u64()), (Some("file"), Some(5), Some(3)));
    assert!(pool.ok(&["ls", "-l", "/x"]).contains(" f\n"));
    // mv into a directory, rename of a directory, replacing a file.
    pool.ok(&["mv", "/x/f", "/x/y"]);
    assert_eq!(pool.get("/x/y/f"), b"hello");
    pool.ok(&["mv", "/x/y", "/moved"]);
    assert_eq!(pool.get("/moved/f"), b"hello");
    pool.put("/other", b"other");
    pool.ok(&["mv", "/other", "/moved/f"]);
    assert_eq!(pool.get("/moved/f"), b"other");
    // get into a device is written as it is (no partial file beside it)
    pool.ok(&["get", "/moved/f", "/dev/null"]);
    // stdin and stdout
    let mut child = pool.cmd(&["put", "-", "/stdin"]).stdin(std::process::Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(b"from stdin").unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(pool.ok(&["get", "/stdin", "-"]), "from stdin");
    // priority and pin
    pool.ok(&[
        "put",
        "--priority",
        "5",
        "--chunk-size",
        "64KiB",
        pool.dir().join("upload.tmp").to_str().unwrap(),
        "/p",
    ]);
    let st: serde_json::Value = serde_json::from_str(&pool.ok(&["stat", "--json", "/p"])).unwrap();
    assert_eq!((st["priority"].as_u64(), st["chunk_size"].as_u64()), (Some(5), Some(65536)));
    assert_eq!(pool.ok(&["pin", "/moved"]), "pinned 1 file\n");
    pool.ok(&["rm", "-r", "/moved"]);
    assert_eq!(pool.ok(&["ls", "/"]), "p\nstdin\nx/\n");
}

#[test]
fn bench_writes_and_reads_back_files_one_or_many_to_a_request() {
    let pool = Pool::start(1, "32MiB", "32MiB");
    for (batch, requests) in [("1", 37), ("16", 3)] {
        let out = pool.ok(&["bench", "--files", "37", "--size", "3KiB", "--threads", "4", "--batch", batch, "--json"]);
        let j: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(j["verified"], true);
        for phase in ["write", "read"] {
            assert_eq!((j[phase]["ops"].as_u64(), j[phase]["requests"].as_u64()), (Some(37), Some(requests)), "{out}");
        }
        assert_eq!(j["delete"]["requests"].as_u64(), Some(37), "stats and deletes stay one a request");
    }
    // Each file read three times over: 37 files in 3 requests a pass.
    let out = pool.ok(&["bench", "--files", "37", "--size", "3KiB", "--batch", "16", "--reads", "3", "--json"]);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!((j["read"]["ops"].as_u64(), j["read"]["requests"].as_u64()), (Some(111), Some(9)), "{out}");
    assert_eq!((j["write"]["ops"].as_u64(), j["reads"].as_u64()), (Some(37), Some(3)), "{out}");
    assert_eq!(j["client_threads"].as_u64(), Some(1), "small files: one client thread, as redis-benchmark");
    let out = pool.ok(&["bench", "--files", "5", "--size", "3KiB", "--client-threads", "3", "--json"]);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!((j["client_threads"].as_u64(), j["read"]["ops"].as_u64()), (Some(3), Some(5)), "{out}");
    assert_eq!(pool.ok(&["ls", "/"]), "", "the bench leaves nothing behind");
    // Whole chunks read go into the client's kept buffers, all given back.
    let out = pool.ok(&["bench", "--files", "2", "--size", "4MiB", "--reads", "3", "--json"]);
    let b = &serde_json::from_str::<serde_json::Value>(&out).unwrap()["client_buffers"];
    let (fresh, reused) = (b["fresh"].as_u64().unwrap(), b["reused"].as_u64().unwrap());
    assert_eq!((fresh + reused, b["lent"].as_u64(), b["size"].as_u64()), (6, Some(0), Some(4 << 20)), "{out}");
    let e = pool.err(&["bench", "--files", "3", "--batch", "0"]);
    assert_eq!(e, "tierpool: --files, --threads, --batch and --reads must be at least 1");
    let e = pool.err(&["bench", "--files", "3000000000", "--reads", "2"]);
    assert_eq!(e, "tierpool: --files times --reads is too large");
    let e = pool.err(&["bench", "--files", "3", "--client-threads", "0"]);
    assert_eq!(e, "tierpool: --client-threads must be at least 1");
}

#[test]
fn bad_input_gets_one_line_errors() {
    let pool = Pool::start(1, "16MiB", "16MiB");
    pool.ok(&["mkdir", "/d"]);
    pool.put("/d/f", b"1");
    let cases: &[(&[&str], &str)] = &[
        (&["cat", "/nope"], "tierpool: /nope: no such file or directory"),
        (&["mkdir", "/d"], "tierpool: /d: file exists"),
        (&["mkdir", "/d/f/g"], "tierpool: /d/f/g: not a directory"),
        (&["rm", "/d"], "tierpool: /d: directory not empty"),
        (&["cat", "/d"], "tierpool: /d: is a directory"),
        (&["put", "--no-clobber", "/dev/null", "/d/f"], "tierpool: /d/f: file exists"),
        (
            &["put", "/no/such/local", "/x"],
            "tierpool: cannot read /no/such/local: No such file or directory (os error 2)",
        ),
        (&["put", "--priority", "9", "/dev/null", "/x"], "tierpool: priority 9 is out of range 1..5"),
        (&["rm", "/"], "tierpool: cannot remove the root directory"),
    ];
    for (args, want) in cases {
        assert_eq!(pool.err(args), *want, "{args:?}");
    }
    let e = pool.err(&["put", "--chunk-size", "12XB", "/dev/null", "/x"]);
    assert!(e.contains("invalid size '12XB'"), "{e}");
}

#[test]
fn unreachable_coordinator_fails_fast() {
    let t = Instant::now();
    let out = std::process::Command::new(BIN).args(["ls", "/", "--coordinator", "127.0.0.1:1"]).output().unwrap();
    assert!(!out.status.success());
    let e = String::from_utf8(out.stderr).unwrap();
    assert!(e.starts_with("tierpool: cannot reach the coordinator at 127.0.0.1:1"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(5));
}

/// Sends `bytes` on `s` and reads what comes back until the server closes.
fn junk(mut s: std::net::TcpStream, bytes: &[u8]) -> Vec<u8> {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(bytes).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

#[test]
fn servers_survive_malformed_messages() {
    let pool = Pool::start(1, "16MiB", "16MiB");
    let worker = pool.status()["workers"][0]["address"].as_str().unwrap().to_string();
    let v = tierpool_proto::PROTOCOL_VERSION;
    // Frame kinds: 1 = a coordinator request, 2 = a worker request, 3 = a response.
    for (addr, kind, other) in [(pool.addr.as_str(), 1u8, 2u8), (worker.as_str(), 2, 1)] {
        // Not our protocol at all, before the handshake: the hello, a refusal, the end.
        let reply = junk(std::net::TcpStream::connect(addr).unwrap(), b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!((reply.len(), &reply[36..]), (41, &[b'T', b'P', v, 0x13, 2][..]), "{reply:?}");
        // A well-framed message whose body is garbage: an error reply, then close.
        let mut frame = vec![b'T', b'P', v, kind, 4, 0, 0, 0, 0, 0, 0, 0];
        frame.extend_from_slice(&[0xff, 0xff, 0xff, 0xff]);
        let reply = junk(pool.raw(addr), &frame);
        assert!(reply.starts_with(&[b'T', b'P', v, 3]), "{reply:?}");
        // A request for the other role: an error naming the right one, and the
        // connection stays open for the next request (here a Ping, variant 0).
        let mut frames = vec![b'T', b'P', v, other, 1, 0, 0, 0, 0, 0, 0, 0, 0];
        frames.extend_from_slice(&[b'T', b'P', v, kind, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
        let replies = junk_replies(pool.raw(addr), &frames, 2);
        assert!(String::from_utf8_lossy(&replies[0]).contains("that request is for"), "{:?}", replies[0]);
        // The Ping's answer: Ok (0) then Pong (variant 0).
        assert_eq!(replies[1], [0, 0], "{:?}", replies[1]);
        // A frame announcing a giant payload is refused before allocating it.
        let mut frame = vec![b'T', b'P', v, kind, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f];
        frame.push(0);
        assert!(junk(pool.raw(addr), &frame).is_empty());
        // An older protocol version is refused.
        assert!(junk(pool.raw(addr), &[b'T', b'P', v - 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]).is_empty());
    }
    pool.put("/still", &data(9, 5000));
    assert_eq!(pool.get("/still"), data(9, 5000));
    assert!(pool.log("coordinator.log").contains("dropping connection"));
}

/// Sends `bytes` on `s` and reads `n` response frames; returns their message bodies.
fn junk_replies(mut s: std::net::TcpStream, bytes: &[u8], n: usize) -> Vec<Vec<u8>> {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(bytes).unwrap();
    (0..n)
        .map(|_| {
            let mut head = [0u8; 12];
            s.read_exact(&mut head).unwrap();
            assert_eq!(&head[0..4], &[b'T', b'P', tierpool_proto::PROTOCOL_VERSION, 3], "a response frame");
            let len = u32::from_le_bytes(head[4..8].try_into().unwrap()) as usize;
            let mut body = vec![0u8; len];
            s.read_exact(&mut body).unwrap();
            body
        })
        .collect()
}
