//! The Landlock ruleset of one call: what the child may read (system paths, its runtime, the
//! plugin directory, declared read roots), read and write (declared write roots and the
//! call's private temporary directory), and, without network permission, no TCP.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use ::landlock::{
    path_beneath_rules, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope, ABI,
};

use super::confine::{
    runtime_paths, ConfineError, Confinement, NETWORK_READ, SYSTEM_READ, SYSTEM_WRITE,
};

/// Builds the ruleset for `c` running `program` with `tmp` as its temporary directory.
pub(super) fn ruleset(
    c: &Confinement,
    program: &Path,
    tmp: &Path,
) -> Result<Option<OwnedFd>, ConfineError> {
    // Target the newest ABI this code knows; the crate drops what the kernel lacks.
    let abi = ABI::V6;
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))?;
    if !c.network {
        ruleset = ruleset.handle_access(AccessNet::from_all(abi))?;
    }
    let ruleset = ruleset.scope(Scope::from_all(abi))?;
    let mut read: Vec<PathBuf> = SYSTEM_READ.iter().map(PathBuf::from).collect();
    if c.network {
        read.extend(NETWORK_READ.iter().map(PathBuf::from));
    }
    read.extend(runtime_paths(program));
    read.extend(c.plugin_dir.iter().cloned());
    read.extend(c.read.iter().cloned());
    let mut write: Vec<PathBuf> = vec![tmp.to_path_buf()];
    write.extend(c.write.iter().cloned());
    let dev = AccessFs::from_read(abi) | AccessFs::WriteFile | AccessFs::Truncate;
    let created = ruleset
        .create()?
        .add_rules(path_beneath_rules(&read, AccessFs::from_read(abi)))?
        .add_rules(path_beneath_rules(SYSTEM_WRITE, dev))?
        .add_rules(path_beneath_rules(&write, AccessFs::from_all(abi)))?;
    Ok(created.into())
}
