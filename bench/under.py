#!/usr/bin/env python3
"""The pool as a tier over under-stores: first (cold) and second (warm)
reads of a dataset against reading the store directly, write throughput
per write mode, and how long attaching a tree of many files takes.

One run, on this machine, on an embedded pool of two workers:
  - a directory store: `cat` of the files (the page cache holds them: this
    machine does not let the cache be dropped, so "direct" is memory
    speed) vs the first read through the pool (loads every chunk) and the
    second (from the pool);
  - an S3 store (s3s-fs on loopback, its data on local disk): boto3
    `get_object` vs the first and second read through the pool;
  - an HDFS store (Hadoop's minicluster, one NameNode and one DataNode on
    loopback, its data on local disk): `hdfs dfs -cat` of the files (Hadoop's
    own shell, one JVM for all files, its start included) vs the first and
    second read through the pool;
  - writes of the same files to a plain pool directory, to a `through`
    attachment (directory, S3, HDFS), to a `back` one (directory, S3, HDFS: the
    write returns once the chunks are on the workers' disks; then the
    seconds until the write-back had it all below) and to a `pool-only`
    one: MB/s and the fraction of the plain pool's;
  - attaching a tree of SMALL small files: seconds and files per second.
Writes JSON to stdout and to bench/results/under-<timestamp>.json.

Usage: python3 bench/under.py [--files 8] [--size 64MiB] [--small 5000] [--runs 2]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as common  # noqa: E402

import tierpool  # noqa: E402

ROOT = common.ROOT


def s3s_fs():
    return subprocess.run(["bash", os.path.join(ROOT, "scripts", "s3-server.sh")], check=True,
                          capture_output=True, text=True).stdout.strip()


class S3:
    """An s3s-fs server over `root` (one directory per bucket)."""

    def __init__(self, root):
        self.root, self.port = root, common.free_port()
        self.key, self.secret = "bench-key", "bench-secret"
        self.proc = subprocess.Popen([s3s_fs(), "--host", "127.0.0.1", "--port", str(self.port),
                                      "--access-key", self.key, "--secret-key", self.secret, root],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def options(self):
        return {"endpoint": self.endpoint, "region": "us-east-1", "access_key_id": self.key,
                "secret_access_key": self.secret}

    def close(self):
        self.proc.terminate()
        self.proc.wait()


def hdfs_lib():
    return subprocess.run(["bash", os.path.join(ROOT, "scripts", "hdfs-server.sh")], check=True,
                          capture_output=True, text=True).stdout.strip()


class Hdfs:
    """Hadoop's minicluster with its data under `root`, and Hadoop's shell."""

    def __init__(self, root):
        self.root, self.port = root, common.free_port()
        os.makedirs(os.path.join(root, "conf"), exist_ok=True)
        # Hadoop's shell reads the file system's address from core-site.xml on its class path.
        with open(os.path.join(root, "conf", "core-site.xml"), "w") as f:
            f.write("<?xml version=\"1.0\"?><configuration><property><name>fs.defaultFS</name>"
                    f"<value>hdfs://127.0.0.1:{self.port}</value></property></configuration>\n")
        self.cp = os.path.join(root, "conf") + ":" + os.path.join(hdfs_lib(), "*")
        self.log = open(os.path.join(root, "cluster.log"), "wb")
        os.makedirs(os.path.join(root, "tmp"))
        self.proc = subprocess.Popen(["java", "-Xmx1g", "-XX:-UsePerfData", "-Djava.io.tmpdir=" + os.path.join(root, "tmp"), "-cp", os.path.join(hdfs_lib(), "*"), "org.apache.hadoop.test.MiniDFSClusterManager",
                                      "-format", "-nnport", str(self.port), "-httpport", str(common.free_port()),
                                      "-datanodes", "1"], cwd=root, stdout=self.log, stderr=self.log)
        deadline = time.time() + 180
        while b"Started MiniDFSCluster" not in open(os.path.join(root, "cluster.log"), "rb").read():
            if time.time() > deadline or self.proc.poll() is not None:
                raise SystemExit("the HDFS minicluster did not start; see " + os.path.join(root, "cluster.log"))
            time.sleep(0.2)

    def uri(self, path):
        return f"hdfs://127.0.0.1:{self.port}/{path}"

    def shell(self, *args, stdout=subprocess.DEVNULL):
        """`hdfs dfs ARGS`: Hadoop's FsShell in a JVM of its own."""
        subprocess.run(["java", "-XX:-UsePerfData", "-cp", self.cp, "org.apache.hadoop.fs.FsShell", *args], check=True, stdout=stdout,
                       stderr=subprocess.DEVNULL)

    def close(self):
        self.proc.kill()
        self.proc.wait()


def dataset(root, files, size):
    os.makedirs(root, exist_ok=True)
    block = os.urandom(1 << 20)
    for i in range(files):
        with open(os.path.join(root, f"part-{i:03}.bin"), "wb") as f:
            for _ in range(size >> 20):
                f.write(block)
    return [f"part-{i:03}.bin" for i in range(files)]


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def read_pool(client, at, names):
    for n in names:
        client.get(f"{at}/{n}", os.devnull)


def rate(total, secs):
    return round(total / secs / 1e6, 1)


def reads(client, at, names, total, direct, runs):
    """Direct, first and second read MB/s (median of `runs`, each on a fresh attach)."""
    cold, warm, d = [], [], []
    for _ in range(runs):
        d.append(timed(direct))
        client.free(at)
        cold.append(timed(lambda: read_pool(client, at, names)))
        warm.append(timed(lambda: read_pool(client, at, names)))
    direct_mb, cold_mb, warm_mb = (rate(total, statistics.median(x)) for x in (d, cold, warm))
    return {"direct_mb_per_sec": direct_mb, "first_read_mb_per_sec": cold_mb, "second_read_mb_per_sec": warm_mb,
            "first_vs_direct": round(cold_mb / direct_mb, 2), "second_vs_direct": round(warm_mb / direct_mb, 2),
            "runs": {"direct_s": d, "first_s": cold, "second_s": warm}}


def writes(client, at, src, names, total):
    def put_all():
        for n in names:
            client.put(os.path.join(src, n), f"{at}/w-{n}")
    secs = timed(put_all)
    return rate(total, secs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--size", default="64MiB")
    ap.add_argument("--small", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=2)
    a = ap.parse_args()
    size = tierpool.parse_size(a.size)
    total = a.files * size
    result = {"files": a.files, "file_size": size, "bytes": total}
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/var/tmp")) as tmp, \
            tierpool.local(workers=2, mem="1GiB", disk="4GiB", set_env=False) as c:
        src = os.path.join(tmp, "dir")
        names = dataset(src, a.files, size)
        c.attach(f"file://{src}", "/dir")

        def cat():
            for n in names:
                with open(os.path.join(src, n), "rb") as f:
                    while f.read(8 << 20):
                        pass
        result["directory"] = reads(c, "/dir", names, total, cat, a.runs)

        s3root = os.path.join(tmp, "s3")
        dataset(os.path.join(s3root, "lake"), a.files, size)
        s3 = S3(s3root)
        hdfs = Hdfs(os.path.join(tmp, "hdfs"))
        try:
            hdfs.shell("-put", src, "/lake")

            def hdfs_cat():
                hdfs.shell("-cat", *[f"/lake/{n}" for n in names])
            c.attach(hdfs.uri("lake"), "/hdfs")
            result["hdfs"] = reads(c, "/hdfs", names, total, hdfs_cat, a.runs)

            import boto3
            b = boto3.client("s3", endpoint_url=s3.endpoint, aws_access_key_id=s3.key,
                             aws_secret_access_key=s3.secret, region_name="us-east-1")

            def boto():
                for n in names:
                    body = b.get_object(Bucket="lake", Key=n)["Body"]
                    while body.read(8 << 20):
                        pass
            c.attach("s3://lake", "/lake", options=s3.options())
            result["s3"] = reads(c, "/lake", names, total, boto, a.runs)

            c.mkdir("/plain")
            plain = writes(c, "/plain", src, names, total)
            os.makedirs(os.path.join(tmp, "po"))
            c.attach(f"file://{os.path.join(tmp, 'po')}", "/po", mode="pool-only")
            os.makedirs(os.path.join(tmp, "through"))
            c.attach(f"file://{os.path.join(tmp, 'through')}", "/through")
            os.makedirs(os.path.join(tmp, "back"))
            c.attach(f"file://{os.path.join(tmp, 'back')}", "/back", mode="back")
            c.attach("s3://lake/back", "/lakeback", mode="back", options=s3.options())
            hdfs.shell("-mkdir", "-p", "/wh/through", "/wh/back")
            c.attach(hdfs.uri("wh/through"), "/whthrough")
            c.attach(hdfs.uri("wh/back"), "/whback", mode="back")
            modes = {"pool_mb_per_sec": plain}
            for name, at in (("pool_only", "/po"), ("through_directory", "/through"), ("through_s3", "/lake"),
                             ("through_hdfs", "/whthrough"), ("back_directory", "/back"), ("back_s3", "/lakeback"),
                             ("back_hdfs", "/whback")):
                t0 = time.perf_counter()
                mb = writes(c, at, src, names, total)
                modes[f"{name}_mb_per_sec"] = mb
                modes[f"{name}_vs_pool"] = round(mb / plain, 2)
                if name.startswith("back"):
                    while True:
                        [st] = [x for x in c.status()["attachments"] if x["path"] == at]
                        if st["dirty_files"] == 0:
                            break
                        time.sleep(0.05)
                    # From the first put until the store had every file (rounds every 2 s).
                    modes[f"{name}_below_after_s"] = round(time.perf_counter() - t0, 2)
            result["writes"] = modes
        finally:
            s3.close()
            hdfs.close()

        small = os.path.join(tmp, "small")
        for d in range(a.small // 100 + 1):
            os.makedirs(os.path.join(small, f"d{d:03}"), exist_ok=True)
        for i in range(a.small):
            with open(os.path.join(small, f"d{i // 100:03}", f"f{i:05}.txt"), "wb") as f:
                f.write(b"x" * 100)
        secs = timed(lambda: c.attach(f"file://{small}", "/small"))
        result["attach"] = {"files": a.small, "seconds": round(secs, 2), "files_per_sec": round(a.small / secs)}
    common.write_result("under-", result)


if __name__ == "__main__":
    main()
