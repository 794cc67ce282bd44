#!/usr/bin/env bash
# POSIX conformance of the FUSE mount: runs pjdfstest (0.2.2) in a real mount
# over a real pool (one worker, 64MiB MEM + 512MiB DISK) and prints how many of
# its tests pass. Fails when a test fails that is not in the list of known
# failures at the end of this file (each group there says why it fails; see
# docs/fuse.md), so conformance can only go up. A known failure that passes is
# reported, to be taken off the list. Installs fuse3 and pjdfstest when missing.
# Uses the debug binary that `cargo test` builds, or $TIERPOOL_BIN.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

if ! command -v fusermount3 >/dev/null 2>&1; then
    echo "== installing fuse3 (for the FUSE mount tests)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fuse3 >/dev/null
fi
PJD="$(command -v pjdfstest || echo "$HOME/.cargo/bin/pjdfstest")"
if [ ! -x "$PJD" ]; then
    echo "== installing pjdfstest 0.2.2"
    cargo install --quiet pjdfstest --version 0.2.2 --locked
fi
BIN="${TIERPOOL_BIN:-$ROOT/target/debug/tierpool}"
[ -x "$BIN" ] || cargo build --quiet -p tierpool

WORK="$(mktemp -d)"
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
export TIERPOOL_COORDINATOR="127.0.0.1:$PORT"
cleanup() {
    "$BIN" umount "$WORK/mnt" >/dev/null 2>&1 || fusermount3 -u "$WORK/mnt" >/dev/null 2>&1 || true
    "$BIN" down --dir "$WORK/pool" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

mkdir -p "$WORK/mnt"
"$BIN" up --dir "$WORK/pool" --workers 1 --mem 64MiB --disk 512MiB --port "$PORT" >/dev/null
"$BIN" mount "$WORK/mnt" >/dev/null
printf '[dummy_auth]\nentries = [["nobody", "nogroup"], ["daemon", "daemon"]]\n' >"$WORK/pjdfstest.toml"

echo "== pjdfstest on the mount"
(cd "$WORK/mnt" && "$PJD" -c "$WORK/pjdfstest.toml" -p "$WORK/mnt" >"$WORK/out.txt" 2>&1) || true
grep -E '^Summary:' "$WORK/out.txt" || { tail -20 "$WORK/out.txt"; echo "pjdfstest did not finish" >&2; exit 1; }
grep -E '^[a-z_0-9:]+ +FAILED$' "$WORK/out.txt" | awk '{print $1}' | sort >"$WORK/failed"
sed -n '/^# known failures$/,$p' "$0" | grep -E '^[a-z_0-9:]+$' | sort >"$WORK/known"
passed=$(grep -cE '^[a-z_0-9:]+ +ok$' "$WORK/out.txt" || true)
ran=$((passed + $(wc -l <"$WORK/failed")))
echo "pjdfstest: $passed of $ran tests pass ($(grep -cE '^[a-z_0-9:]+ +skipped' "$WORK/out.txt" || true) skipped)"
fixed=$(comm -13 "$WORK/failed" "$WORK/known")
[ -z "$fixed" ] || { echo "known failures that now pass (take them off the list):"; echo "$fixed"; }
new=$(comm -23 "$WORK/failed" "$WORK/known")
if [ -n "$new" ]; then
    echo "tests that fail and are not known failures:" >&2
    echo "$new" >&2
    exit 1
fi
exit 0

# Why the known failures fail (most need what docs/fuse.md lists as not there yet):
# - symlink, link, mknod, mkfifo: symlinks, hard links and special files are not
#   offered (ENOSYS), and every test that creates one to check another call fails;
# - chown and the tests that act as another user: the pool keeps no owners (EPERM);
# - a file unlinked while open is gone for its handle (unlink::open_file_not_freed);
# - a file is published whole, so a write at 2 GiB in a pool of 576 MiB is ENOSPC
#   (open::interact_2gb), and O_TRUNC of an open file does not move its times;
# - times: access times are not kept; tests needing a second user fail (EACCES).
# known failures
chmod::change_perm::block
chmod::change_perm::char
chmod::change_perm::dir
chmod::change_perm::fifo
chmod::change_perm::regular
chmod::change_perm::socket
chmod::clear_isgid_bit
chmod::eloop_comp
chmod::eloop_final_comp
chmod::enoent_symlink
chmod::enotdir_component::block
chmod::enotdir_component::char
chmod::enotdir_component::fifo
chmod::enotdir_component::socket
chmod::failed_chmod_unchanged_ctime::block
chmod::failed_chmod_unchanged_ctime::char
chmod::failed_chmod_unchanged_ctime::fifo
chmod::failed_chmod_unchanged_ctime::socket
chmod::update_ctime::block
chmod::update_ctime::char
chmod::update_ctime::fifo
chmod::update_ctime::socket
chown::eloop_comp
chown::eloop_final_comp
chown::enoent_symlink
chown::enotdir_component::block
chown::enotdir_component::char
chown::enotdir_component::fifo
chown::enotdir_component::socket
chown::lchown::eloop_comp
chown::lchown::enotdir_component::block
chown::lchown::enotdir_component::char
chown::lchown::enotdir_component::fifo
chown::lchown::enotdir_component::socket
ftruncate::affected_create_flags_only
link::changed_ctime_success::block
link::changed_ctime_success::char
link::changed_ctime_success::fifo
link::changed_ctime_success::regular
link::changed_ctime_success::socket
link::eexist_dest_exists::block
link::eexist_dest_exists::char
link::eexist_dest_exists::fifo
link::eexist_dest_exists::socket
link::eexist_dest_exists::symlink
link::eloop_comp
link::enotdir_component_either::block
link::enotdir_component_either::char
link::enotdir_component_either::fifo
link::enotdir_component_either::socket
link::remove_link::block
link::remove_link::char
link::remove_link::fifo
link::remove_link::regular
link::remove_link::socket
link::share_metadata::block
link::share_metadata::char
link::share_metadata::fifo
link::share_metadata::regular
link::share_metadata::socket
link::unchanged_ctime_fails::block
link::unchanged_ctime_fails::char
link::unchanged_ctime_fails::fifo
link::unchanged_ctime_fails::socket
mkdir::eexist_file_exists::block
mkdir::eexist_file_exists::char
mkdir::eexist_file_exists::fifo
mkdir::eexist_file_exists::socket
mkdir::eexist_file_exists::symlink
mkdir::eloop_comp
mkdir::enotdir_component::block
mkdir::enotdir_component::char
mkdir::enotdir_component::fifo
mkdir::enotdir_component::socket
mkdir::uid_gid_eq_euid_egid
mkfifo::changed_time_fields_success
mkfifo::eexist_file_exists::block
mkfifo::eexist_file_exists::char
mkfifo::eexist_file_exists::fifo
mkfifo::eexist_file_exists::socket
mkfifo::eexist_file_exists::symlink
mkfifo::eloop_comp
mkfifo::enotdir_component::block
mkfifo::enotdir_component::char
mkfifo::enotdir_component::fifo
mkfifo::enotdir_component::socket
mkfifo::permission_bits_from_mode
mkfifo::uid_gid_eq_euid_egid
mknod::changed_time_fields_success
mknod::changed_times_success::block
mknod::changed_times_success::char
mknod::device_files::block
mknod::device_files::char
mknod::eexist_file_exists::block
mknod::eexist_file_exists::char
mknod::eexist_file_exists::fifo
mknod::eexist_file_exists::socket
mknod::eexist_file_exists::symlink
mknod::eloop_comp
mknod::enotdir_comp_char_block::block
mknod::enotdir_comp_char_block::char
mknod::enotdir_comp_char_block::fifo
mknod::enotdir_comp_char_block::socket
mknod::enotdir_component::block
mknod::enotdir_component::char
mknod::enotdir_component::fifo
mknod::enotdir_component::socket
mknod::permission_bits_from_mode
mknod::privileged::eexist_file_exists::block
mknod::privileged::eexist_file_exists::char
mknod::privileged::eexist_file_exists::fifo
mknod::privileged::eexist_file_exists::socket
mknod::privileged::eexist_file_exists::symlink
mknod::uid_gid_eq_euid_egid
open::eexist_file_exists::block
open::eexist_file_exists::char
open::eexist_file_exists::fifo
open::eexist_file_exists::socket
open::eexist_file_exists::symlink
open::eloop_comp
open::fifo_nonblock_wronly
open::interact_2gb
open::open_nofollow
open::open_trunc
open::socket_error
open::uid_gid_eq_euid_egid
rename::eexist_enotempty_to_non_empty::block
rename::eexist_enotempty_to_non_empty::char
rename::eexist_enotempty_to_non_empty::fifo
rename::eexist_enotempty_to_non_empty::socket
rename::eexist_enotempty_to_non_empty::symlink
rename::eisdir_to_dir_from_not_dir::block
rename::eisdir_to_dir_from_not_dir::char
rename::eisdir_to_dir_from_not_dir::fifo
rename::eisdir_to_dir_from_not_dir::socket
rename::eisdir_to_dir_from_not_dir::symlink
rename::eloop_comp
rename::enotdir_component_either::block
rename::enotdir_component_either::char
rename::enotdir_component_either::fifo
rename::enotdir_component_either::socket
rename::enotdir_from_dir_to_not_dir::block
rename::enotdir_from_dir_to_not_dir::char
rename::enotdir_from_dir_to_not_dir::fifo
rename::enotdir_from_dir_to_not_dir::socket
rename::preserve_metadata::block
rename::preserve_metadata::char
rename::preserve_metadata::fifo
rename::preserve_metadata::regular
rename::preserve_metadata::socket
rename::preserve_metadata_symlink
rename::to_multiply_linked::block
rename::to_multiply_linked::char
rename::to_multiply_linked::fifo
rename::to_multiply_linked::regular
rename::to_multiply_linked::socket
rename::unchanged_ctime_failed::block
rename::unchanged_ctime_failed::char
rename::unchanged_ctime_failed::dir
rename::unchanged_ctime_failed::fifo
rename::unchanged_ctime_failed::regular
rename::unchanged_ctime_failed::socket
rename::unchanged_ctime_failed::symlink
rename::write_access_required_subdir
rmdir::eexist_enotempty_non_empty_dir::block
rmdir::eexist_enotempty_non_empty_dir::char
rmdir::eexist_enotempty_non_empty_dir::fifo
rmdir::eexist_enotempty_non_empty_dir::socket
rmdir::eexist_enotempty_non_empty_dir::symlink
rmdir::eloop_comp
rmdir::enotdir_component::block
rmdir::enotdir_component::char
rmdir::enotdir_component::fifo
rmdir::enotdir_component::socket
symlink::changed_parent_time_success
symlink::create_symlink::block
symlink::create_symlink::char
symlink::create_symlink::dir
symlink::create_symlink::fifo
symlink::create_symlink::regular
symlink::create_symlink_to_symlink
symlink::eexist_file_exists::block
symlink::eexist_file_exists::char
symlink::eexist_file_exists::fifo
symlink::eexist_file_exists::socket
symlink::eexist_file_exists::symlink
symlink::enotdir_component::block
symlink::enotdir_component::char
symlink::enotdir_component::fifo
symlink::enotdir_component::socket
truncate::eloop_comp
truncate::enotdir_component::block
truncate::enotdir_component::char
truncate::enotdir_component::fifo
truncate::enotdir_component::socket
unlink::eloop_comp
unlink::enotdir_component::block
unlink::enotdir_component::char
unlink::enotdir_component::fifo
unlink::enotdir_component::socket
unlink::open_file_not_freed
unlink::remove_type::block
unlink::remove_type::char
unlink::remove_type::fifo
unlink::remove_type::socket
unlink::remove_type::symlink
unlink::unchanged_ctime_failed::block
unlink::unchanged_ctime_failed::char
unlink::unchanged_ctime_failed::fifo
unlink::unchanged_ctime_failed::regular
unlink::unchanged_ctime_failed::socket
unlink::update_ctime_success::block
unlink::update_ctime_success::char
unlink::update_ctime_success::fifo
unlink::update_ctime_success::regular
unlink::update_ctime_success::socket
unlink::update_mtime_ctime_success_folder::block
unlink::update_mtime_ctime_success_folder::char
unlink::update_mtime_ctime_success_folder::fifo
unlink::update_mtime_ctime_success_folder::socket
unlink::update_mtime_ctime_success_folder::symlink
