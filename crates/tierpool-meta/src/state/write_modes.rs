//! Write modes per file: `SetWriteMode`.
//!
//! A file beneath an attachment follows its attachment's write mode unless
//! it has its own (`Origin::mode`), which decides what becomes of its
//! bytes: written below before a close returns (`through`), in the
//! background (`back`), or kept in the pool (`pool-only`). Names (new
//! directories, removals, renames) follow the attachment's mode, since a
//! directory's entries are one listing below.
//!
//! Invariants: only a file with an origin has a mode of its own (files
//! outside attachments have none to keep); a file of a `pool-only`
//! attachment never writes through or back (renames there stay in the
//! pool, so its key would not follow it); a file replaced at its path by
//! a commit hands its mode to the new file, so a mode set on a path holds
//! across rewrites; nothing beneath a read-only attachment changes.

use super::inode::Body;
use super::MetaState;
use crate::path::display;
use crate::{MetaReply, Timestamp, WriteMode};
use tierpool_types::{Error, ErrorKind, Result};

impl MetaState {
    pub(super) fn set_write_mode(
        &mut self,
        comps: &[String],
        mode: Option<WriteMode>,
        recursive: bool,
        now: Timestamp,
    ) -> Result<MetaReply> {
        let shown = display(comps);
        let id = self.lookup(comps)?;
        let n = self.node(id);
        let att = match (&n.body, &n.origin) {
            (Body::File { .. }, Some(o)) => Some(o.attach),
            (Body::Dir { .. }, _) if recursive => self.attachment_of(id),
            (Body::Dir { .. }, _) => {
                return Err(Error::new(
                    ErrorKind::IsADirectory,
                    format!(
                        "{shown}: is a directory: a write mode is set on files (recursively for every file beneath)"
                    ),
                ))
            }
            (Body::File { .. }, None) => None,
            _ => return Err(Error::invalid(format!("{shown}: is not a file: write modes are set on files"))),
        };
        let Some(att) = att else {
            return Err(Error::invalid(format!(
                "{shown}: is not beneath an attached under-store (write modes apply to files there)"
            )));
        };
        let a = &self.attachments[&att];
        if a.readonly {
            return Err(Error::new(
                ErrorKind::ReadOnly,
                format!("{shown}: is in the under-store {} attached read-only", a.uri),
            ));
        }
        if mode.is_some_and(|m| m.mirrors_names()) && !a.mode.mirrors_names() {
            // Its object would not follow it: names there stay in the pool.
            return Err(Error::invalid(format!(
                "{shown}: is in the under-store {} attached pool-only, whose names (renames, removals) stay in the \
                 pool: its files cannot write through or back (attach it in one of those modes, and make files \
                 pool-only there)",
                a.uri
            )));
        }
        // Validated: mutate.
        let ids = if recursive { self.subtree(id) } else { vec![id] };
        let mut files = Vec::new();
        for i in ids {
            let n = self.node(i);
            if !matches!(n.body, Body::File { .. }) || n.origin.as_ref().is_none_or(|o| o.mode == mode) {
                continue;
            }
            let n = self.node_mut(i);
            n.origin.as_mut().expect("a file with an origin").mode = mode;
            n.ctime = now;
            files.push(i);
        }
        Ok(MetaReply::WriteModes { files })
    }
}
