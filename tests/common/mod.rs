//! Shared harness of the broker tests: an Apache Kafka broker started per test, the
//! `neardup` binary as a child process, record generators and output readers.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

static SERIAL: Mutex<()> = Mutex::new(());

/// One kill of a [`kill_schedule`].
pub struct Kill {
    /// The role to kill.
    pub role: usize,
    /// Wait until the role is ready first (two kills in three; the others land during its
    /// start-up or its read of the topics).
    pub when_ready: bool,
    /// Then wait this long (0–700 ms) and kill it.
    pub after: Duration,
}

/// `n` kills spread evenly over `roles` roles (kill k goes to role k mod `roles`), in an order
/// and at moments drawn from `seed`: the same schedule at every run.
pub fn kill_schedule(n: usize, roles: usize, seed: u64) -> Vec<Kill> {
    let mut rng = seed;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut order: Vec<usize> = (0..n).map(|k| k % roles).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, (next() % (i as u64 + 1)) as usize);
    }
    order
        .into_iter()
        .enumerate()
        .map(|(k, role)| Kill {
            role,
            when_ready: k % 3 != 0,
            after: Duration::from_millis(next() % 700),
        })
        .collect()
}

/// The broker tests share two cores: run them one at a time.
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// A port free now and never handed out before by this process: the system may give the
/// port just released to the next request, and a broker given one port for both of its
/// listeners refuses to start (seen once in CI).
pub fn free_port() -> u16 {
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let mut given = GIVEN.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if given.insert(port) {
            return port;
        }
    }
}

/// The script that runs one Apache Kafka broker in the foreground (its jars come from
/// `bash scripts/install-deps.sh`).
fn broker_script() -> PathBuf {
    repo_root().join("scripts/kafka-broker.sh")
}

/// The repository's root (the tests of `neardup-lab` share this harness from below it).
pub fn repo_root() -> PathBuf {
    let mut p = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    while !p.join("scripts/kafka-broker.sh").exists() {
        assert!(
            p.pop(),
            "no scripts/kafka-broker.sh above {}",
            env!("CARGO_MANIFEST_DIR")
        );
    }
    p
}

/// TLS and SASL/SCRAM on a second listener: its port and the one user's credentials.
struct Secure {
    port: u16,
    user: String,
    password: String,
}

/// An Apache Kafka broker (one node, KRaft) with its data in a temporary directory, killed on
/// drop.
pub struct Broker {
    pub port: u16,
    pub dir: tempfile::TempDir,
    controller_port: u16,
    child: Option<Child>,
    secure: Option<Secure>,
    /// A node of a cluster: its id, the quorum, the cluster id and the replicas.
    node: Option<Node>,
}

/// What makes a broker a node of a cluster (scripts/kafka-broker.sh's variables).
#[derive(Clone)]
struct Node {
    id: u32,
    voters: String,
    cluster_id: String,
    replicas: u32,
}

/// Creates `topics` (name, partitions) at `replicas` and `min_isr` through the brokers at
/// `addr`.
fn create_topics_at(addr: &str, topics: &[(&str, i32)], replicas: i32, min_isr: &str) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .create()
        .unwrap();
    let new: Vec<NewTopic<'_>> = topics
        .iter()
        .map(|(t, p)| {
            NewTopic::new(t, *p, TopicReplication::Fixed(replicas))
                .set("min.insync.replicas", min_isr)
        })
        .collect();
    let res = futures::executor::block_on(admin.create_topics(&new, &AdminOptions::new()))
        .expect("create topics");
    for r in res {
        r.expect("topic created");
    }
}

/// A client that asks the brokers at `addr` for metadata (its own log quiet).
fn metadata_probe(addr: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("log_level", "3")
        .create()
        .unwrap()
}

/// Three Apache Kafka nodes on this machine (KRaft, each broker and controller), internal
/// topics and topics created without settings at replication factor 3 and
/// min.insync.replicas 2, as a production cluster.
pub struct Cluster {
    pub nodes: Vec<Broker>,
}

impl Cluster {
    /// Three nodes on ports of their own. A node that exits while the cluster forms (on this
    /// machine two tests form clusters at once, each taking six free ports before any
    /// process binds them) starts the three again on other ports, at most three times.
    pub fn start() -> Cluster {
        let mut last = String::new();
        for attempt in 1..=3 {
            match Cluster::try_start() {
                Ok(c) => return c,
                Err(e) => {
                    eprintln!(
                        "the cluster did not form (attempt {attempt}), again on other ports: {e}"
                    );
                    last = e;
                }
            }
        }
        panic!("the cluster did not form three times: {last}");
    }

    fn try_start() -> Result<Cluster, String> {
        let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
        let voters = ports
            .iter()
            .enumerate()
            .map(|(i, (_, c))| format!("{}@127.0.0.1:{c}", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        // 16 bytes in URL-safe base64 without padding, not starting with '-'
        let cluster_id = "TmVhcmR1cENsdXN0ZXIxNg".to_string();
        let mut nodes: Vec<Broker> = ports
            .iter()
            .enumerate()
            .map(|(i, (port, cport))| Broker {
                port: *port,
                dir: tempfile::tempdir().unwrap(),
                controller_port: *cport,
                child: None,
                secure: None,
                node: Some(Node {
                    id: i as u32 + 1,
                    voters: voters.clone(),
                    cluster_id: cluster_id.clone(),
                    replicas: 3,
                }),
            })
            .collect();
        // a quorum needs two controllers: every node starts before any is waited for
        let mut children: Vec<Option<Child>> = nodes.iter().map(|n| Some(n.launch())).collect();
        for i in 0..nodes.len() {
            let child = children[i].take().expect("launched");
            if let Err(e) = nodes[i].try_wait_up(child) {
                // the nodes waited for stop with `nodes`; the others here
                for mut c in children.into_iter().flatten() {
                    let _ = c.kill();
                    let _ = c.wait();
                }
                return Err(e);
            }
        }
        let c = Cluster { nodes };
        c.wait_brokers(3);
        Ok(c)
    }

    /// The bootstrap list of every node.
    pub fn addr(&self) -> String {
        self.nodes
            .iter()
            .map(Broker::addr)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// A node that runs, for the harness's own clients.
    pub fn any(&self) -> &Broker {
        self.nodes
            .iter()
            .find(|n| n.child.is_some())
            .expect("a node runs")
    }

    /// Waits until the cluster's metadata lists `n` brokers.
    pub fn wait_brokers(&self, n: usize) {
        let probe = metadata_probe(&self.addr());
        wait_until(Duration::from_secs(120), "the cluster's brokers", || {
            probe
                .fetch_metadata(None, Duration::from_secs(2))
                .is_ok_and(|md| md.brokers().len() >= n)
        });
    }

    /// Waits until every partition of `topics` has all its replicas in sync.
    pub fn wait_in_sync(&self, topics: &[&str]) {
        let probe = metadata_probe(&self.addr());
        wait_until(Duration::from_secs(180), "every replica in sync", || {
            topics.iter().all(|t| {
                probe
                    .fetch_metadata(Some(t), Duration::from_secs(5))
                    .is_ok_and(|md| {
                        md.topics().iter().all(|tm| {
                            !tm.partitions().is_empty()
                                && tm
                                    .partitions()
                                    .iter()
                                    .all(|p| p.leader() >= 0 && p.isr().len() == p.replicas().len())
                        })
                    })
            })
        });
    }

    /// Creates topics of `partitions` each at the cluster's replication factor (3) and
    /// min.insync.replicas 2, and waits until every running node's metadata names each topic
    /// with a leader for every partition: a node learns of a new topic a moment after the
    /// controller, and a client it answers first would be told the topic does not exist.
    pub fn create_topics(&self, topics: &[(&str, i32)]) {
        create_topics_at(&self.addr(), topics, 3, "2");
        for node in self.nodes.iter().filter(|n| n.child.is_some()) {
            let probe = metadata_probe(&node.addr());
            wait_until(
                Duration::from_secs(60),
                "every node names the new topics",
                || {
                    topics.iter().all(|(t, partitions)| {
                        probe
                            .fetch_metadata(Some(t), Duration::from_secs(5))
                            .is_ok_and(|md| {
                                md.topics().iter().any(|tm| {
                                    tm.name() == *t
                                        && tm.error().is_none()
                                        && tm.partitions().len() == *partitions as usize
                                        && tm.partitions().iter().all(|p| p.leader() >= 0)
                                })
                            })
                    })
                },
            );
        }
    }

    /// The node that leads `topic`'s `partition`.
    pub fn leader(&self, topic: &str, partition: i32) -> Option<usize> {
        let probe = metadata_probe(&self.addr());
        let md = probe
            .fetch_metadata(Some(topic), Duration::from_secs(10))
            .ok()?;
        let p = md
            .topics()
            .first()?
            .partitions()
            .iter()
            .find(|p| p.id() == partition)?;
        (p.leader() >= 1).then(|| p.leader() as usize - 1)
    }
}

impl Broker {
    pub fn start() -> Broker {
        Broker::start_with(None)
    }

    /// A broker with a second listener that requires TLS (the certificate `server.pem` and
    /// key `server.key` of `certs`) and SASL/SCRAM-SHA-512 as `user`; the plain listener
    /// stays open for the tests' own clients. Returns the broker and the secure port.
    pub fn start_secure(certs: &Path, user: &str, password: &str) -> (Broker, u16) {
        let port = free_port();
        let dir = tempfile::tempdir().unwrap();
        for f in ["server.pem", "server.key"] {
            std::fs::copy(certs.join(f), dir.path().join(f)).unwrap();
        }
        let b = Broker::start_in(
            dir,
            Some(Secure {
                port,
                user: user.to_string(),
                password: password.to_string(),
            }),
        );
        (b, port)
    }

    fn start_with(secure: Option<Secure>) -> Broker {
        Broker::start_in(tempfile::tempdir().unwrap(), secure)
    }

    fn start_in(dir: tempfile::TempDir, secure: Option<Secure>) -> Broker {
        let mut b = Broker {
            port: free_port(),
            dir,
            controller_port: free_port(),
            child: None,
            secure,
            node: None,
        };
        b.spawn();
        b
    }

    fn spawn(&mut self) {
        let child = self.launch();
        self.wait_up(child);
    }

    /// Starts the broker's process.
    fn launch(&self) -> Child {
        let log = std::fs::File::options()
            .create(true)
            .append(true)
            .open(self.dir.path().join("stdout.log"))
            .unwrap();
        let mut cmd = Command::new("bash");
        cmd.arg(broker_script())
            .arg(self.dir.path())
            .arg(self.port.to_string())
            .arg(self.controller_port.to_string());
        if let Some(s) = &self.secure {
            cmd.arg(s.port.to_string())
                .env("NEARDUP_BROKER_USER", &s.user)
                .env("NEARDUP_BROKER_PASSWORD", &s.password);
        }
        if let Some(n) = &self.node {
            cmd.env("NEARDUP_BROKER_NODE_ID", n.id.to_string())
                .env("NEARDUP_BROKER_VOTERS", &n.voters)
                .env("NEARDUP_BROKER_CLUSTER_ID", &n.cluster_id)
                .env("NEARDUP_BROKER_REPLICAS", n.replicas.to_string());
        }
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start the broker")
    }

    /// Waits until the broker answers metadata requests.
    fn wait_up(&mut self, child: Child) {
        if let Err(e) = self.try_wait_up(child) {
            panic!("{e}");
        }
    }

    /// Waits until the broker answers metadata requests; the broker's exit before that is
    /// an error that says why (the ends of its output and of its log).
    fn try_wait_up(&mut self, mut child: Child) -> Result<(), String> {
        // the broker answers metadata requests once it has registered with its controller
        let probe = metadata_probe(&self.addr());
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                let tail = |name: &str| {
                    let text =
                        std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
                    let lines: Vec<&str> = text.lines().collect();
                    lines[lines.len().saturating_sub(30)..].join("\n")
                };
                return Err(format!(
                    "the broker on port {} exited ({status}): {}\n-- broker.log:\n{}",
                    self.port,
                    tail("stdout.log"),
                    tail("broker.log")
                ));
            }
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                if let Ok(md) = probe.fetch_metadata(None, Duration::from_secs(2)) {
                    if !md.brokers().is_empty() {
                        break;
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "the broker did not start (see {})",
                self.dir.path().join("broker.log").display()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        self.child = Some(child);
        Ok(())
    }

    /// Stops the broker (its data stays).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Stops the broker with SIGTERM, the way an orchestrator does (its data stays). It
    /// may take a while to go, with its connections still open.
    pub fn terminate(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same ports and data.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// The broker's process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn create_topics(&self, topics: &[(&str, i32)]) {
        create_topics_at(&self.addr(), topics, 1, "1");
    }

    /// Produces records (partition, key, value) and waits for every acknowledgement.
    pub fn produce(&self, topic: &str, records: &[Input]) {
        produce_to(&self.addr(), topic, records);
    }

    /// Reads the records of `topics` until `count` arrived, nothing more came for 2 s after
    /// the first one, or `timeout` passed.
    /// The offsets a consumer group committed on a topic's partitions (-1: none).
    pub fn committed(&self, group: &str, topic: &str, partitions: i32) -> Vec<i64> {
        let c: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", self.addr())
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .create()
            .unwrap();
        let mut tpl = TopicPartitionList::new();
        for p in 0..partitions {
            tpl.add_partition(topic, p);
        }
        let got = c.committed_offsets(tpl, Duration::from_secs(10)).unwrap();
        (0..partitions)
            .map(|p| match got.find_partition(topic, p).map(|e| e.offset()) {
                Some(Offset::Offset(o)) => o,
                _ => -1,
            })
            .collect()
    }

    /// Whether `topic`'s `partition` has an open transaction holding records: its end as a
    /// read_committed reader sees it (the last stable offset) before its end.
    pub fn open_transaction(&self, topic: &str, partition: i32) -> bool {
        let end = |isolation: &str| {
            let c: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", self.addr())
                .set("isolation.level", isolation)
                .create()
                .unwrap();
            c.fetch_watermarks(topic, partition, Duration::from_secs(10))
                .unwrap()
                .1
        };
        end("read_committed") < end("read_uncommitted")
    }

    /// A consumer of every partition of `topics` from the beginning, outside any group's
    /// offsets, at `isolation` (read_committed or read_uncommitted).
    fn reader(&self, topics: &[&str], isolation: &str) -> BaseConsumer {
        let c: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", self.addr())
            .set("group.id", "neardup-test-reader")
            .set("isolation.level", isolation)
            .set("enable.auto.commit", "false")
            .set("fetch.wait.max.ms", "50")
            .create()
            .unwrap();
        let mut tpl = TopicPartitionList::new();
        for t in topics {
            let md = c.fetch_metadata(Some(t), Duration::from_secs(10)).unwrap();
            for p in md.topics()[0].partitions() {
                tpl.add_partition_offset(t, p.id(), Offset::Beginning)
                    .unwrap();
            }
        }
        c.assign(&tpl).unwrap();
        c
    }

    /// Records of `topics`, including those of aborted transactions (transaction markers are
    /// not records): read until 3 s pass without one.
    pub fn read_uncommitted(&self, topics: &[&str]) -> usize {
        let c = self.reader(topics, "read_uncommitted");
        let (mut n, mut last) = (0, Instant::now());
        while last.elapsed() < Duration::from_secs(3) {
            if let Some(Ok(_)) = c.poll(Duration::from_millis(200)) {
                n += 1;
                last = Instant::now();
            }
        }
        n
    }

    pub fn read(&self, topics: &[&str], count: usize, timeout: Duration) -> Vec<Out> {
        self.read_quiet(topics, count, timeout, Duration::from_secs(2))
    }

    /// Reads records from the beginning of `topics`: `count` of them, or until `quiet`
    /// passes without one (after the first), or until `timeout`.
    pub fn read_quiet(
        &self,
        topics: &[&str],
        count: usize,
        timeout: Duration,
        quiet: Duration,
    ) -> Vec<Out> {
        self.read_isolated(topics, count, timeout, quiet, "read_committed")
    }

    /// Every record of `topics` the broker holds, those of aborted and open transactions
    /// included, until 3 s pass without one.
    pub fn read_all_uncommitted(&self, topics: &[&str]) -> Vec<Out> {
        self.read_isolated(
            topics,
            usize::MAX,
            Duration::from_secs(120),
            Duration::from_secs(3),
            "read_uncommitted",
        )
    }

    fn read_isolated(
        &self,
        topics: &[&str],
        count: usize,
        timeout: Duration,
        quiet: Duration,
        isolation: &str,
    ) -> Vec<Out> {
        let c = self.reader(topics, isolation);
        let mut out = Vec::new();
        let deadline = Instant::now() + timeout;
        let mut last = Instant::now();
        while out.len() < count && Instant::now() < deadline {
            if !out.is_empty() && last.elapsed() > quiet {
                break;
            }
            match c.poll(Duration::from_millis(200)) {
                Some(Ok(m)) => {
                    last = Instant::now();
                    let mut headers = BTreeMap::new();
                    if let Some(h) = m.headers() {
                        for x in h.iter() {
                            headers.insert(
                                x.key.to_string(),
                                String::from_utf8_lossy(x.value.unwrap_or_default()).into_owned(),
                            );
                        }
                    }
                    out.push(Out {
                        topic: m.topic().to_string(),
                        partition: m.partition(),
                        key: m.key().map(|k| String::from_utf8_lossy(k).into_owned()),
                        headers,
                        value: m.payload().unwrap_or_default().to_vec(),
                    });
                }
                Some(Err(e)) => eprintln!("reader: {e}"),
                None => {}
            }
        }
        out
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.stop();
    }
}

/// An input record: partition, key, value (None: a record without a value).
pub type Input = (i32, String, Option<Vec<u8>>);

/// An output record.
#[derive(Clone, Debug)]
pub struct Out {
    pub topic: String,
    pub partition: i32,
    pub key: Option<String>,
    pub headers: BTreeMap<String, String>,
    pub value: Vec<u8>,
}

impl Out {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.value).expect("output is JSON")
    }

    /// The input record this output answers: the page id, or `topic:partition:offset` of a
    /// dead letter's source.
    pub fn source(&self) -> String {
        let v = self.json();
        if v["schema"] == "neardup.dead-letter.v1" {
            let s = &v["source"];
            format!(
                "{}:{}:{}",
                s["topic"].as_str().unwrap(),
                s["partition"],
                s["offset"]
            )
        } else {
            v["id"].as_str().unwrap().to_string()
        }
    }
}

/// Produces records to a topic of the broker at `addr` and waits for every acknowledgement.
pub fn produce_to(addr: &str, topic: &str, records: &[Input]) {
    let p = producer(addr);
    send_all(&p, topic, records);
}

/// Sends `records` to `topic` of the brokers at `addr` from a thread of its own, `chunk` at
/// a time with a pause after each (pages that arrive while a test kills and starts
/// processes).
pub fn feed_paced(
    addr: &str,
    topic: &str,
    records: Vec<Input>,
    chunk: usize,
    pause: Duration,
) -> std::thread::JoinHandle<()> {
    let (addr, topic) = (addr.to_string(), topic.to_string());
    std::thread::spawn(move || {
        let p = producer(&addr);
        for c in records.chunks(chunk) {
            send_all(&p, &topic, c);
            std::thread::sleep(pause);
        }
    })
}

/// An idempotent producer to the broker at `addr`.
pub fn producer(addr: &str) -> BaseProducer {
    ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("enable.idempotence", "true")
        .set("message.max.bytes", "100000000")
        .set("linger.ms", "5")
        .create()
        .unwrap()
}

/// Sends records (partition, key, value) with `p` and waits for every acknowledgement.
pub fn send_all(p: &BaseProducer, topic: &str, records: &[Input]) {
    for (part, key, value) in records {
        let mut r: BaseRecord<'_, str, [u8]> =
            BaseRecord::to(topic).partition(*part).key(key.as_str());
        if let Some(v) = value {
            r = r.payload(&v[..]);
        }
        loop {
            match p.send(r) {
                Ok(()) => break,
                Err((_, back)) => {
                    r = back;
                    p.poll(Duration::from_millis(10));
                }
            }
        }
    }
    p.flush(Duration::from_secs(60))
        .expect("all records acknowledged");
}

/// Checks outputs against the input ids: every id answered, and an output repeated for the
/// same input byte-identical to the first (value, headers and topic). Returns the first
/// output of each input and the number of repeats.
pub fn first_outputs<'a>(
    outs: &'a [Out],
    ids: &std::collections::BTreeSet<String>,
) -> (BTreeMap<String, &'a Out>, usize) {
    let mut first: BTreeMap<String, &Out> = BTreeMap::new();
    let mut repeats = 0;
    for o in outs {
        let src = o.source();
        match first.get(&src) {
            None => {
                first.insert(src, o);
            }
            Some(f) => {
                repeats += 1;
                assert_eq!(f.value, o.value, "repeated output for {src} differs");
                assert_eq!(f.headers, o.headers, "repeated headers for {src} differ");
                assert_eq!(f.topic, o.topic);
            }
        }
    }
    let missing: Vec<_> = ids.iter().filter(|i| !first.contains_key(*i)).collect();
    assert!(
        missing.is_empty(),
        "{} of {} inputs without an output ({} outputs read), e.g. {:?}",
        missing.len(),
        ids.len(),
        outs.len(),
        &missing[..missing.len().min(5)]
    );
    (first, repeats)
}

/// Runs a command to its end and asserts that it succeeded (its stderr is the message).
pub fn output_ok(cmd: &mut Command, what: &str) -> std::process::Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The `neardup` binary under test (from the benchmarks' tests: the one built beside
/// `neardup-lab`).
pub fn neardup() -> Command {
    Command::new(match option_env!("CARGO_BIN_EXE_neardup") {
        Some(exe) => PathBuf::from(exe),
        None => lab_binary().with_file_name("neardup"),
    })
}

/// The `neardup-lab` binary (in its own crate's tests; from the product's tests, where it
/// is not built, the name it would have beside `neardup`).
#[allow(dead_code)]
pub fn lab_binary() -> PathBuf {
    match option_env!("CARGO_BIN_EXE_neardup-lab") {
        Some(exe) => PathBuf::from(exe),
        None => PathBuf::from(option_env!("CARGO_BIN_EXE_neardup").unwrap_or("neardup"))
            .with_file_name("neardup-lab"),
    }
}

/// A running stage process.
pub struct Stage {
    pub child: Child,
    pub http: u16,
    pub log: PathBuf,
}

impl Stage {
    /// Starts `neardup run` with the given extra arguments.
    pub fn start(broker: &Broker, index: &Path, log: &Path, extra: &[&str]) -> Stage {
        Stage::start_at(&broker.addr(), index, log, extra)
    }

    /// Starts `neardup run` against the bootstrap address `brokers`.
    pub fn start_at(brokers: &str, index: &Path, log: &Path, extra: &[&str]) -> Stage {
        let http = free_port();
        let listen = format!("127.0.0.1:{http}");
        let logf = std::fs::File::create(log).unwrap();
        let child = neardup()
            .args(["run", "--brokers", brokers, "--index"])
            .arg(index)
            .args(["--listen", &listen, "--log-format", "json"])
            // the client's and the stage's own defaults: no session or fetch setting is
            // shortened for the tests
            .args(extra)
            .env(
                "RUST_LOG",
                std::env::var("NEARDUP_TEST_RUST_LOG").unwrap_or("info".into()),
            )
            // the allocator's tunables the binary sets for itself, whatever the runner's
            .env_remove("GLIBC_TUNABLES")
            .stdout(Stdio::null())
            .stderr(logf)
            .spawn()
            .expect("start neardup run");
        Stage {
            child,
            http,
            log: log.to_path_buf(),
        }
    }

    /// GET a path of the HTTP listener: (status, body).
    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        http_get(self.http, path)
    }

    /// Waits until the stage consumes: /readyz answers 200 with no Kafka state to report
    /// (ready to serve is not enough: "ready to serve; kafka: …").
    pub fn wait_ready(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some((200, r)) = self.get("/readyz") {
                if !r.contains("kafka:") {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "stage not ready in time; log:\n{}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A counter or gauge value from /metrics (sum over label sets matching `filter`).
    pub fn metric(&self, name: &str, filter: &str) -> f64 {
        metric_at(self.http, name, filter)
    }

    /// The values of a metric, one per label set matching `filter`.
    pub fn metric_values(&self, name: &str, filter: &str) -> Vec<f64> {
        let Some((200, body)) = self.get("/metrics") else {
            return Vec::new();
        };
        body.lines()
            .filter(|l| l.starts_with(name) && l.contains(filter))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .collect()
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{sig}"), &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{sig}");
    }

    /// Waits for the process to exit: its exit code (None when killed by a signal).
    pub fn wait(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st.code();
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "stage did not exit in time; log:\n{}",
                    std::fs::read_to_string(&self.log).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The scheduling policy of each thread of process `pid` (0 normal, 3 batch), from
/// /proc/PID/task/TID/stat (its 41st field).
pub fn thread_policies(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let stat = std::fs::read_to_string(e.ok()?.path().join("stat")).ok()?;
        // the fields after the command name, which is in parentheses, start at the third
        let rest = &stat[stat.rfind(')')? + 1..];
        rest.split_whitespace().nth(41 - 3)?.parse().ok()
    })
    .collect()
}

/// A counter or gauge value from the /metrics of the listener on `port` (sum over label
/// sets matching `filter`; 0 when it does not answer).
pub fn metric_at(port: u16, name: &str, filter: &str) -> f64 {
    let Some((200, body)) = http_get(port, "/metrics") else {
        return 0.0;
    };
    body.lines()
        .filter(|l| l.starts_with(name) && l.contains(filter))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    let code = buf.split_whitespace().nth(1)?.parse().ok()?;
    let body = buf.split_once("\r\n\r\n").map(|x| x.1.to_string())?;
    Some((code, body))
}

/// Any request to the HTTP listener on `port`: (status, body). The connection is closed
/// after the answer.
pub fn http_request(port: u16, method: &str, path: &str, body: &[u8]) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .ok()?;
    // a server may answer (413) before reading all of a large body
    let _ = s.write_all(body);
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let buf = String::from_utf8_lossy(&buf).into_owned();
    let code = buf.split_whitespace().nth(1)?.parse().ok()?;
    let body = buf.split_once("\r\n\r\n").map(|x| x.1.to_string())?;
    Some((code, body))
}

/// POST a JSON body: (status, parsed answer).
pub fn http_post_json(port: u16, path: &str, body: &serde_json::Value) -> (u16, serde_json::Value) {
    let (code, text) = http_request(port, "POST", path, &serde_json::to_vec(body).unwrap())
        .unwrap_or_else(|| panic!("no answer from POST {path}"));
    let v = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}: {text}"));
    (code, v)
}

/// Deterministic words: syllables from a seeded generator.
fn word(seed: u64) -> String {
    const SYL: &[&str] = &[
        "ka", "lo", "mi", "ren", "tu", "sa", "vel", "dor", "pi", "nor", "gal", "fen", "ri", "mo",
        "tan", "bel", "cor", "du", "les", "van",
    ];
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    let n = 2 + (x % 2) as usize;
    let mut w = String::new();
    for _ in 0..n {
        x = x.rotate_left(17).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        w.push_str(SYL[(x >> 33) as usize % SYL.len()]);
    }
    w
}

/// The article text of story `story`: sentences with antecedents, so it has signatures.
pub fn story_text(story: u64, edit: bool) -> String {
    let mut s = String::new();
    for i in 0..24u64 {
        let w = |j: u64| word(story * 10_000 + i * 16 + j);
        if edit && i == 7 {
            s.push_str("<p>An editor's note was added to the story this morning.</p>\n");
            continue;
        }
        s.push_str(&format!(
            "<p>The {} {} was {} {} by the {} {} that {} said {} {} is {} {}.</p>\n",
            w(0),
            w(1),
            w(2),
            w(3),
            w(4),
            w(5),
            w(6),
            w(7),
            w(8),
            w(9),
            w(10)
        ));
    }
    s
}

/// A page of story `story` in template `template` (0–2), optionally edited.
pub fn story_page(story: u64, template: u64, edit: bool) -> String {
    let (head, foot) = match template {
        0 => (
            "<header><nav><a href=/>Home</a> <a href=/local>Local</a></nav></header><main><article>",
            "</article></main><footer>Contact us. Terms. Privacy.</footer>",
        ),
        1 => (
            "<div class=top><ul><li><a href=/news>News</a></li><li><a href=/sport>Sport</a></li></ul></div><div id=story>",
            "</div><div class=ad>Advertisement: buy the best garden tools today</div><div class=bottom>All rights reserved</div>",
        ),
        _ => (
            "<table><tr><td><a href=/>Front page</a></td></tr></table><section class=content>",
            "</section><aside>Most read: <a href=/a>one</a> <a href=/b>two</a></aside>",
        ),
    };
    format!(
        "<html><head><title>Story {story}</title></head><body>{head}<h1>Story {story}</h1>\n{}{foot}</body></html>",
        story_text(story, edit)
    )
}

/// A page record as JSON bytes.
pub fn page_json(id: &str, url: &str, html: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({"id": id, "url": url, "html": html})).unwrap()
}

/// Synthetic stream: `stories` stories × 3 copies (three templates, the last edited). Each
/// story's copies go to one partition (`story % partitions`), in order.
pub fn synthetic(stories: u64, partitions: i32) -> Vec<Input> {
    synthetic_range(0, stories, partitions)
}

/// [`synthetic`] for the stories numbered `from` to `to` (excluded).
pub fn synthetic_range(from: u64, to: u64, partitions: i32) -> Vec<Input> {
    let mut v = Vec::new();
    for copy in 0..3u64 {
        for s in from..to {
            let id = format!("s{s:05}-c{copy}");
            let url = format!("https://site{copy}.test/story/{s}");
            let html = story_page(s, copy, copy == 2);
            v.push((
                (s % partitions as u64) as i32,
                format!("story-{s}"),
                Some(page_json(&id, &url, &html)),
            ));
        }
    }
    v
}

/// Waits until `f` is true.
pub fn wait_until(timeout: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Peak resident memory of a process in KiB (VmHWM), if it still runs.
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The page ids of input records.
pub fn ids(records: &[Input]) -> std::collections::BTreeSet<String> {
    records
        .iter()
        .filter_map(|(_, _, v)| serde_json::from_slice::<serde_json::Value>(v.as_ref()?).ok())
        .filter_map(|v| v["id"].as_str().map(str::to_string))
        .collect()
}

/// A tagged record's id and its (decision, canonical id).
pub fn decision_of(v: &serde_json::Value) -> (String, (String, String)) {
    (
        v["id"].as_str().unwrap().to_string(),
        (
            v["dedup"]["decision"].as_str().unwrap().to_string(),
            v["dedup"]["canonical_id"]
                .as_str()
                .unwrap_or("")
                .to_string(),
        ),
    )
}

/// `neardup dedup` over the valid records in production order: id → (decision, canonical).
pub fn file_mode(records: &[Input], dir: &Path) -> BTreeMap<String, (String, String)> {
    file_mode_with(records, dir, &[])
}

/// [`file_mode`] with more flags of `neardup dedup`.
pub fn file_mode_with(
    records: &[Input],
    dir: &Path,
    args: &[&str],
) -> BTreeMap<String, (String, String)> {
    let input = dir.join("file-mode.jsonl");
    let mut lines = Vec::new();
    for (_, _, v) in records {
        if let Some(v) = v {
            if let Ok(p) = neardup::record::decode_page(v, 200_000) {
                let _ = p;
                lines.extend_from_slice(v);
                lines.push(b'\n');
            }
        }
    }
    std::fs::write(&input, lines).unwrap();
    let out = dir.join("file-mode-out.jsonl");
    let st = neardup()
        .args(["dedup", "--input"])
        .arg(&input)
        .arg("--index")
        .arg(dir.join("file-mode-index"))
        .arg("--unique")
        .arg(&out)
        .args(["--max-record-bytes", "200000"])
        .arg("--dead-letter")
        .arg(dir.join("file-mode-dead.jsonl"))
        .args(args)
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::read_to_string(out)
        .unwrap()
        .lines()
        .map(|l| decision_of(&serde_json::from_str(l).unwrap()))
        .collect()
}

/// A broker with the input topic `pages` (3 partitions) and the three output topics.
pub fn broker_with_topics() -> Broker {
    let b = Broker::start();
    b.create_topics(&[
        ("pages", 3),
        ("pages-unique", 3),
        ("pages-duplicate", 3),
        ("pages-dead-letter", 1),
    ]);
    b
}

/// The validator of `schemas/NAME`.
pub fn validator(name: &str) -> jsonschema::Validator {
    let path = repo_root().join("schemas").join(name);
    let schema: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

/// A number from the environment, or the default (the longer variants of the tests raise
/// them).
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// How many outputs answer each input (its page id, or a dead letter's source position).
pub fn answers(outs: &[Out]) -> BTreeMap<String, usize> {
    let mut n: BTreeMap<String, usize> = BTreeMap::new();
    for o in outs {
        *n.entry(o.source()).or_default() += 1;
    }
    n
}

/// Every input of `ids` answered exactly once, and nothing else answered.
pub fn check_exactly_once(outs: &[Out], ids: &std::collections::BTreeSet<String>) {
    let n = answers(outs);
    let missing: Vec<_> = ids
        .iter()
        .filter(|id| !n.contains_key(*id))
        .take(5)
        .collect();
    assert!(missing.is_empty(), "inputs not answered, e.g. {missing:?}");
    let repeated: Vec<_> = n.iter().filter(|(_, c)| **c > 1).take(5).collect();
    assert!(
        repeated.is_empty(),
        "inputs answered more than once, e.g. {repeated:?}"
    );
    assert_eq!(n.len(), ids.len(), "outputs for inputs never sent");
}

/// Stops each stage with SIGTERM (each exits 0), reads `topics` as a read_committed consumer
/// sees them once they are quiet, adds the source of every dead letter to `ids` (a bad record
/// is answered by its dead letter), and checks that every input of `ids` is answered exactly
/// once. Returns the outputs and the ids.
pub fn stop_and_check_exactly_once<'a>(
    b: &Broker,
    stages: impl IntoIterator<Item = &'a mut Stage>,
    topics: &[&str],
    mut ids: std::collections::BTreeSet<String>,
) -> (Vec<Out>, std::collections::BTreeSet<String>) {
    for s in stages {
        s.signal("TERM");
        assert_eq!(s.wait(Duration::from_secs(60)), Some(0));
    }
    let outs = b.read_quiet(
        topics,
        usize::MAX,
        Duration::from_secs(120),
        Duration::from_secs(5),
    );
    for o in outs.iter().filter(|o| o.topic == "pages-dead-letter") {
        ids.insert(o.source());
    }
    check_exactly_once(&outs, &ids);
    (outs, ids)
}

#[allow(unused_imports)]
pub use neardup::telemetry::cpu_seconds;
