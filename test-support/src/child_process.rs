//! A test binary run again as a child process, with only one of its tests
//! selected and told what to do by an environment variable: how a test puts
//! load on a store from several processes, or kills a process that holds
//! something. `cargo` is not involved.
//!
//! The child's test does nothing unless the variable is set, so an ordinary
//! `cargo test` runs it as an empty test:
//!
//! ```no_run
//! use redlimit_test_support::child_process::{self, TestChild};
//!
//! #[test]
//! fn worker() {
//!     let Some(spec) = child_process::spec("MY_WORKER") else { return };
//!     println!("worker done {spec}");
//! }
//!
//! #[test]
//! fn two_workers() {
//!     let children: Vec<_> = (0..2).map(|_| TestChild::spawn("worker", "MY_WORKER", "hello")).collect();
//!     for child in children {
//!         assert_eq!(child.finish(), ["worker done hello"]);
//!     }
//! }
//! ```

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::thread::JoinHandle;

/// Lines a child prints start with this, so they stand apart from the
/// test harness's own.
const MARK: &str = "child: ";

/// One child process running one test of this binary; killed (SIGKILL) if
/// still running when dropped, so a failing test leaves none behind.
pub struct TestChild {
    test: String,
    child: Child,
    stdout: BufReader<ChildStdout>,
    stderr: Option<JoinHandle<String>>,
}

impl TestChild {
    /// This test binary again, running only `test` with `var=spec` in its
    /// environment. Its stdin is a pipe this process never writes (see
    /// [`exit_with_parent`]), its stdout is read by [`line`](Self::line)
    /// and [`finish`](Self::finish), its stderr is kept for their messages.
    pub fn spawn(test: &str, var: &str, spec: &str) -> TestChild {
        let exe = std::env::current_exe().expect("the test binary's path");
        let mut child = Command::new(exe)
            .args(["--exact", test, "--nocapture", "--quiet", "--test-threads", "1"])
            .env(var, spec)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start the test binary again for `{test}`: {e}"));
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut stderr = child.stderr.take().unwrap();
        // Read as it comes, so a child that writes much to stderr never blocks on a full pipe.
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        TestChild { test: test.into(), child, stdout, stderr: Some(stderr) }
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the next line the child [`say`]s, and returns it (without
    /// the mark); panics, with the child's stderr, if it exits first.
    pub fn line(&mut self) -> String {
        let mut line = String::new();
        loop {
            line.clear();
            let read = self.stdout.read_line(&mut line).expect("read the child's stdout");
            if read == 0 {
                let status = self.child.wait().expect("wait for the child");
                let stderr = self.stderr();
                panic!("child `{}` ended ({status}) before saying a line: {stderr}", self.test);
            }
            if let Some(said) = line.trim_end().strip_prefix(MARK) {
                return said.into();
            }
        }
    }

    /// Kills the child at once (SIGKILL), as a crash would, and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits for the child to end; panics, with its stderr, unless it
    /// succeeded. Returns the lines it [`say`]s from now on.
    pub fn finish(mut self) -> Vec<String> {
        let mut said = Vec::new();
        // Read to the end first: waiting closes the child's stdin.
        for line in self.stdout.by_ref().lines() {
            let line = line.expect("read the child's stdout");
            if let Some(rest) = line.strip_prefix(MARK) {
                said.push(rest.to_string());
            }
        }
        let status = self.child.wait().expect("wait for the child");
        if !status.success() {
            let stderr = self.stderr();
            panic!("child `{}` failed ({status}): {stderr}", self.test);
        }
        said
    }

    fn stderr(&mut self) -> String {
        self.stderr.take().map(|reader| reader.join().unwrap_or_default()).unwrap_or_default()
    }
}

impl Drop for TestChild {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.kill();
        }
    }
}

/// In a child: the spec its parent gave in `var`, `None` in an ordinary run.
pub fn spec(var: &str) -> Option<String> {
    std::env::var(var).ok()
}

/// In a child: prints `line` for the parent's [`TestChild::line`] and
/// [`TestChild::finish`], and flushes it.
pub fn say(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{MARK}{line}").expect("write to the parent");
    out.flush().expect("flush to the parent");
}

/// In a child that would otherwise run until killed: ends this process
/// once its stdin closes, which happens when the parent exits, however it
/// exits (or calls [`TestChild::finish`]).
pub fn exit_with_parent() {
    std::thread::spawn(|| {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
        std::process::exit(0);
    });
}
