#!/usr/bin/env bash
# Prints the directory of the jars of Hadoop's minicluster: a real HDFS
# NameNode and DataNode in one JVM, used by the HDFS under-store tests
# (run: java -cp "DIR/*" org.apache.hadoop.test.MiniDFSClusterManager ...).
# Installs them once from Maven Central into
# ${TIERPOOL_CACHE:-$HOME/.cache/tierpool}/hadoop-minicluster-VERSION, with
# Java and Maven from apt if they are missing. Prints only the directory on
# success; on failure says why on stderr and exits non-zero.
set -euo pipefail

version=3.4.2
root="${TIERPOOL_CACHE:-$HOME/.cache/tierpool}/hadoop-minicluster-$version"
lib="$root/lib"

if [ -f "$root/complete" ]; then
    echo "$lib"
    exit 0
fi

if ! command -v java >/dev/null 2>&1 || ! command -v mvn >/dev/null 2>&1; then
    echo "hdfs-server.sh: installing Java and Maven" >&2
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jre-headless maven >&2
fi

rm -rf "$root"
mkdir -p "$root"
cat >"$root/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>tierpool</groupId>
  <artifactId>hdfs-test-server</artifactId>
  <version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.hadoop</groupId><artifactId>hadoop-minicluster</artifactId><version>$version</version></dependency>
    <dependency><groupId>junit</groupId><artifactId>junit</artifactId><version>4.13.2</version></dependency>
    <dependency><groupId>org.hamcrest</groupId><artifactId>hamcrest-core</artifactId><version>1.3</version></dependency>
  </dependencies>
</project>
POM
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! mvn -B -q -f "$root/pom.xml" -Dmaven.repo.local="$root/m2" dependency:copy-dependencies \
    -DoutputDirectory="$lib" -DincludeScope=runtime >"$log" 2>&1; then
    echo "hdfs-server.sh: fetching hadoop-minicluster $version from Maven Central failed; the end of Maven's output:" >&2
    tail -n 30 "$log" >&2
    exit 1
fi
rm -rf "$root/m2"
touch "$root/complete"
echo "$lib"
