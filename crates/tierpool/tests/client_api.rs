//! The Rust client against a real pool: streaming writes of odd sizes and
//! random-offset reads match an in-memory model byte for byte.

mod common;
use bytes::Bytes;
use common::{data, Pool};
use tierpool_client::{Client, PutOptions};

#[test]
fn streamed_writes_and_random_reads_match_the_model() {
    let pool = Pool::start(2, "1MiB", "64MiB");
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let c = Client::connect(pool.client_config()).await.unwrap();
        let opts = PutOptions { chunk_size: 64 << 10, ..PutOptions::default() };
        let model = data(7, 900_000);
        // Odd write sizes straddle chunk boundaries.
        let mut w = c.create("/model", &opts).await.unwrap();
        let mut off = 0;
        for (i, step) in [1usize, 65_535, 2, 200_000, 7, 131_072].iter().cycle().enumerate() {
            if off >= model.len() {
                break;
            }
            let end = (off + step).min(model.len());
            if i % 2 == 0 {
                w.write(&model[off..end]).await.unwrap();
            } else {
                w.write_bytes(Bytes::copy_from_slice(&model[off..end])).await.unwrap();
            }
            off = end;
        }
        let info = w.close().await.unwrap();
        assert_eq!(info.size, model.len() as u64);
        assert_eq!(info.chunks.len(), model.len().div_ceil(64 << 10));
        let mut x = 12345u64;
        for _ in 0..200 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let offset = x % (model.len() as u64 + 100);
            let len = (x >> 20) as usize % 300_000;
            let mut buf = vec![0u8; len];
            let n = c.read_at("/model", &info, offset, &mut buf).await.unwrap();
            let want = &model[(offset as usize).min(model.len())..(offset as usize + len).min(model.len())];
            assert_eq!(n, want.len(), "offset {offset} len {len}");
            assert!(&buf[..n] == want, "offset {offset} len {len}");
        }
        // An aborted writer publishes nothing.
        let mut w = c.create("/aborted", &opts).await.unwrap();
        w.write(&model).await.unwrap();
        w.abort().await;
        assert_eq!(c.stat("/aborted").await.unwrap_err().kind, tierpool_types::ErrorKind::NotFound);
    });
}
