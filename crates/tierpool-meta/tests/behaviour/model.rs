//! The namespace against a naive model: a `BTreeMap` from full path to kind,
//! where every rule is written directly over path strings. After each op the
//! state machine and the model agree on success or the error kind, on the
//! number of inodes a remove reports, and on the full listing of paths.

use crate::common::*;
use proptest::prelude::*;
use std::collections::BTreeMap;
use tierpool_meta::{InodeKind, MetaOp, MetaReply, MetaState};
use tierpool_types::ErrorKind;

type Outcome = Result<Option<u64>, ErrorKind>;

/// Full path ("/a/b") -> kind; the root is implicit.
#[derive(Default)]
struct Model(BTreeMap<String, InodeKind>);

fn norm(p: &str) -> String {
    let comps: Vec<&str> = p.split('/').filter(|c| !c.is_empty() && *c != ".").collect();
    format!("/{}", comps.join("/"))
}

/// Proper ancestors of a path, root excluded, outermost first.
fn ancestors(p: &str) -> Vec<String> {
    let idx: Vec<usize> = p.match_indices('/').map(|(i, _)| i).filter(|i| *i > 0).collect();
    idx.into_iter().map(|i| p[..i].to_string()).collect()
}

fn under(p: &str, dir: &str) -> bool {
    p.len() > dir.len() && p.starts_with(dir) && p.as_bytes()[dir.len()] == b'/'
}

impl Model {
    fn kind(&self, p: &str) -> Option<InodeKind> {
        if p == "/" {
            Some(InodeKind::Dir)
        } else {
            self.0.get(p).copied()
        }
    }

    /// Every ancestor must exist and be a directory.
    fn check_ancestors(&self, p: &str) -> Result<(), ErrorKind> {
        for a in ancestors(p) {
            match self.kind(&a) {
                None => return Err(ErrorKind::NotFound),
                Some(InodeKind::Dir) => {}
                Some(_) => return Err(ErrorKind::NotADirectory),
            }
        }
        Ok(())
    }

    fn lookup(&self, p: &str) -> Result<InodeKind, ErrorKind> {
        self.check_ancestors(p)?;
        self.kind(p).ok_or(ErrorKind::NotFound)
    }

    fn beneath(&self, dir: &str) -> Vec<String> {
        self.0.keys().filter(|k| under(k, dir)).cloned().collect()
    }

    fn mkdir(&mut self, p: &str, parents: bool) -> Outcome {
        if parents {
            for a in ancestors(p) {
                match self.kind(&a) {
                    Some(InodeKind::Dir) => {}
                    Some(_) => return Err(ErrorKind::NotADirectory),
                    None => break,
                }
            }
            match self.kind(p) {
                Some(InodeKind::Dir) => return Ok(None),
                Some(_) => return Err(ErrorKind::AlreadyExists),
                None => {}
            }
            for a in ancestors(p) {
                self.0.entry(a).or_insert(InodeKind::Dir);
            }
        } else {
            self.check_ancestors(p)?;
            if self.kind(p).is_some() {
                return Err(ErrorKind::AlreadyExists);
            }
        }
        self.0.insert(p.to_string(), InodeKind::Dir);
        Ok(None)
    }

    fn commit(&mut self, p: &str, overwrite: bool) -> Outcome {
        if p == "/" {
            return Err(ErrorKind::IsADirectory);
        }
        self.check_ancestors(p)?;
        match self.kind(p) {
            Some(InodeKind::Dir) => Err(ErrorKind::IsADirectory),
            Some(InodeKind::File) if !overwrite => Err(ErrorKind::AlreadyExists),
            _ => {
                self.0.insert(p.to_string(), InodeKind::File);
                Ok(None)
            }
        }
    }

    fn remove(&mut self, p: &str, recursive: bool) -> Outcome {
        if p == "/" {
            return Err(ErrorKind::InvalidArgument);
        }
        self.lookup(p)?;
        let beneath = self.beneath(p);
        if !beneath.is_empty() && !recursive {
            return Err(ErrorKind::DirectoryNotEmpty);
        }
        for k in &beneath {
            self.0.remove(k);
        }
        self.0.remove(p);
        Ok(Some(beneath.len() as u64 + 1))
    }

    fn rename(&mut self, from: &str, to: &str) -> Outcome {
        if from == "/" || to == "/" {
            return Err(ErrorKind::InvalidArgument);
        }
        let src = self.lookup(from)?;
        if from == to {
            return Ok(None);
        }
        if src == InodeKind::Dir && under(to, from) {
            return Err(ErrorKind::InvalidArgument);
        }
        self.check_ancestors(to)?;
        match (src, self.kind(to)) {
            (_, None) => {}
            (InodeKind::Dir, Some(InodeKind::Dir)) if self.beneath(to).is_empty() => {}
            (InodeKind::Dir, Some(InodeKind::Dir)) => return Err(ErrorKind::DirectoryNotEmpty),
            (_, Some(InodeKind::Dir)) => return Err(ErrorKind::IsADirectory),
            (InodeKind::Dir, Some(_)) => return Err(ErrorKind::NotADirectory),
            (_, Some(_)) => {}
        }
        self.0.remove(to);
        let moved: Vec<String> = self.beneath(from).into_iter().chain([from.to_string()]).collect();
        for old in moved {
            let kind = self.0.remove(&old).expect("listed above");
            self.0.insert(format!("{to}{}", &old[from.len()..]), kind);
        }
        Ok(None)
    }

    fn apply(&mut self, op: &MetaOp) -> Outcome {
        match op {
            MetaOp::Mkdir { path, parents, .. } => self.mkdir(&norm(path), *parents),
            MetaOp::CommitFile { path, overwrite, .. } => self.commit(&norm(path), *overwrite),
            MetaOp::Remove { path, recursive } => self.remove(&norm(path), *recursive),
            MetaOp::Rename { from, to } => self.rename(&norm(from), &norm(to)),
            other => panic!("the model does not know {other:?}"),
        }
    }
}

/// Every path in the state machine's namespace with its kind, from `list`.
fn listing(s: &MetaState) -> BTreeMap<String, InodeKind> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![String::new()];
    while let Some(dir) = dirs.pop() {
        for e in s.list(&format!("{dir}/")).unwrap() {
            let p = format!("{dir}/{}", e.name);
            if e.info.kind == InodeKind::Dir {
                dirs.push(p.clone());
            }
            out.insert(p, e.info.kind);
        }
    }
    out
}

/// Shallow paths, so that most ops meet existing entries; none with `..`.
const MODEL_PATHS: &[&str] = &["/", "/a", "/b", "/c", "/a/b", "/a/c", "/b/a", "c/./a/", "//b//c", "/a/b/c", "/b/a/c"];

/// Namespace ops over paths the model can normalise.
pub fn namespace_op() -> impl Strategy<Value = MetaOp> {
    let path = || prop::sample::select(MODEL_PATHS).prop_map(String::from);
    prop_oneof![
        3 => (path(), prop::bool::weighted(0.7)).prop_map(|(p, parents)| mkdir_op(&p, parents)),
        3 => (path(), any::<bool>()).prop_map(|(p, o)| commit_op(&p, FRESH, 10, o)),
        2 => (path(), any::<bool>()).prop_map(|(p, r)| remove_op(&p, r)),
        3 => (path(), path()).prop_map(|(f, t)| rename_op(&f, &t)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn namespace_agrees_with_a_naive_path_map(ops in prop::collection::vec(namespace_op(), 1..80)) {
        let mut d = Driver::new();
        d.step(MetaOp::Init { partitions: 4 }).2.unwrap();
        let mut model = Model::default();
        for op in ops {
            let (op, _, r) = d.step(op);
            let got: Outcome = r.map(|reply| match reply {
                MetaReply::Removed { inodes, .. } => Some(inodes),
                _ => None,
            }).map_err(|e| e.kind);
            prop_assert_eq!(got, model.apply(&op), "{:?}", op);
            prop_assert_eq!(&listing(&d.state), &model.0, "after {:?}", op);
        }
    }
}
