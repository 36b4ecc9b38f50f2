//! The lineage index on disk (issue #15, fast restart): the arrays of a [`Graph`] as they are,
//! with its [`Coverage`], in one file that a restart reads back instead of rebuilding the
//! index from the tables.
//!
//! Format (little-endian): a 16-byte magic that names the version, the BLAKE3 digest of the
//! rest, then the rest: the coverage (the rowid and manifest id through which every committed
//! `manifests` row is in the index, and the rows above it that are in it too), the table of
//! interned names, the Groups in their numbering order, the node count, the artifact ids in
//! ascending order each with its node's number (read back as they are: `ids.rs`), one record
//! per node (its Group, first manifest and edge lists) and one per manifest (the fields of
//! [`ManifestNode`], names as numbers in the table). `WorkItem`/Mission lists are not
//! stored: they follow from the manifests in order, exactly as `Graph::add` builds them.
//!
//! Decoding checks the digest (beside the decoding) and every count and every number that
//! indexes something, so a torn, corrupt or foreign file is an error (and a full rebuild),
//! never a panic or a number that points outside the index's arrays. That a file whose digest
//! matches says what its writer meant (an id's node holds that id's manifests) rests on the
//! writer, whose round trip the property tests in `restart_tests.rs` pin. Whether the file
//! matches the database is `restart.rs`'s question.

use smallvec::SmallVec;
use weft_api::ArtifactId;

use super::coverage::Coverage;
use super::*;

const MAGIC: &[u8; 16] = b"weft-lineage-v2\n";

/// Why a snapshot file was not used.
#[derive(Debug, thiserror::Error)]
#[error("lineage snapshot unusable: {0}")]
pub(super) struct Unusable(pub(super) &'static str);

/// An id record: the id and its node's number.
const ID_BYTES: usize = 32 + 4;
/// A node record without its edges: Group, first manifest, two edge counts.
const NODE_BYTES: usize = 4 * 4;
/// A manifest record: two ids, size, sequence, five names, Group, next.
const MANIFEST_BYTES: usize = 32 + 32 + 8 + 8 + 5 * 4 + 4 + 4;

/// Appends little-endian numbers to a buffer.
struct Out(Vec<u8>);

impl Out {
    fn u32(&mut self, value: u32) {
        self.0.extend_from_slice(&value.to_le_bytes());
    }
    fn u64(&mut self, value: u64) {
        self.0.extend_from_slice(&value.to_le_bytes());
    }
    fn len(&mut self, value: usize) {
        // Every count in a graph fits: nodes and manifests are numbered by u32.
        self.u32(u32::try_from(value).unwrap_or(u32::MAX));
    }
}

/// Reads little-endian numbers from a buffer, failing at its end.
struct In<'a>(&'a [u8]);

impl<'a> In<'a> {
    fn bytes(&mut self, n: usize) -> Result<&'a [u8], Unusable> {
        if self.0.len() < n {
            return Err(Unusable("truncated"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u32(&mut self) -> Result<u32, Unusable> {
        let mut word = [0; 4];
        word.copy_from_slice(self.bytes(4)?);
        Ok(u32::from_le_bytes(word))
    }
    fn u64(&mut self) -> Result<u64, Unusable> {
        let mut word = [0; 8];
        word.copy_from_slice(self.bytes(8)?);
        Ok(u64::from_le_bytes(word))
    }
    fn id(&mut self) -> Result<ArtifactId, Unusable> {
        let mut id = [0; 32];
        id.copy_from_slice(self.bytes(32)?);
        Ok(ArtifactId(id))
    }
    /// A count of records of at least `record` bytes each, checked against what is left, so
    /// a corrupt count cannot ask for a huge allocation.
    fn count(&mut self, record: usize) -> Result<usize, Unusable> {
        let n = self.u32()? as usize;
        if n.saturating_mul(record) > self.0.len() {
            return Err(Unusable("a count exceeds the file"));
        }
        Ok(n)
    }
}

/// `value` if it is below `bound` (or is `open`, the "none" marker), else an error.
fn index(value: u32, bound: usize, open: Option<u32>) -> Result<u32, Unusable> {
    if (value as usize) < bound || Some(value) == open {
        Ok(value)
    } else {
        Err(Unusable("an index is out of range"))
    }
}

/// The file's bytes for `graph` and `coverage` (taken under the same lock).
/// `sorted` is `graph.index.sorted()`.
pub(super) fn encode(graph: &Graph, sorted: &[(ArtifactId, u32)], coverage: &Coverage) -> Vec<u8> {
    let mut body = Out(Vec::with_capacity(
        64 + graph.nodes.len() * (ID_BYTES + NODE_BYTES + 32)
            + graph.manifests.len() * MANIFEST_BYTES,
    ));
    body.u64(coverage.through.0);
    body.0.extend_from_slice(&coverage.through.1.0);
    body.len(coverage.ahead.len());
    for (rowid, manifest_id) in &coverage.ahead {
        body.u64(*rowid);
        body.0.extend_from_slice(&manifest_id.0);
    }
    // Names, numbered in the order first met in the manifests.
    let mut names: FastMap<Name, u32> = FastMap::default();
    let mut table: Vec<Name> = Vec::new();
    let mut number = |name: Name| -> u32 {
        *names.entry(name).or_insert_with(|| {
            table.push(name);
            (table.len() - 1) as u32
        })
    };
    let mut manifest_names = Vec::with_capacity(graph.manifests.len());
    for manifest in &graph.manifests {
        manifest_names.push([
            number(manifest.group_name),
            number(manifest.mission),
            number(manifest.work_item),
            number(manifest.producer),
            number(manifest.media_type),
        ]);
    }
    let mut groups: Vec<(u32, &str)> = graph.groups.iter().map(|(g, &n)| (n, *g)).collect();
    groups.sort_unstable();
    let group_names: Vec<u32> = groups.iter().map(|(_, g)| number(Name::new(g))).collect();
    body.len(table.len());
    for name in &table {
        body.len(name.len());
        body.0.extend_from_slice(name.as_bytes());
    }
    body.len(group_names.len());
    for name in group_names {
        body.u32(name);
    }
    body.len(graph.nodes.len());
    for &(id, n) in sorted {
        body.0.extend_from_slice(&id.0);
        body.u32(n);
    }
    for node in &graph.nodes {
        body.u32(node.group);
        body.u32(node.first_manifest);
        body.len(node.sources.len());
        body.len(node.derived.len());
        for &(to, manifest) in node.sources.iter().chain(&node.derived) {
            body.u32(to);
            body.u32(manifest);
        }
    }
    body.len(graph.manifests.len());
    for (manifest, names) in graph.manifests.iter().zip(manifest_names) {
        body.0.extend_from_slice(&manifest.artifact.0);
        body.0.extend_from_slice(&manifest.manifest_id.0);
        body.u64(manifest.size);
        body.u64(manifest.sequence);
        for name in names {
            body.u32(name);
        }
        body.u32(manifest.group);
        body.u32(manifest.next);
    }
    let mut file = Vec::with_capacity(MAGIC.len() + 32 + body.0.len());
    file.extend_from_slice(MAGIC);
    file.extend_from_slice(blake3::hash(&body.0).as_bytes());
    file.extend_from_slice(&body.0);
    file
}

/// The graph and coverage a file holds, if its digest and every index in it check out.
///
/// Three threads share the work, since the time to ready is the restart's figure: a second
/// thread (`weft-lineage-verify`) checks the digest, a third (`weft-lineage-ids`) reads and
/// checks the sorted ids, and this one decodes the rest. Decoding checks every count and
/// index, so it is safe on any bytes, and the decoded graph is dropped unless the digest
/// matches.
pub(super) fn decode(file: &[u8]) -> Result<(Graph, Coverage), Unusable> {
    let mut input = In(file);
    if input.bytes(MAGIC.len())? != MAGIC {
        return Err(Unusable("not a lineage snapshot of this version"));
    }
    let digest = input.bytes(32)?;
    let body = input.0;
    std::thread::scope(|scope| {
        let verified = beside(scope, "weft-lineage-verify", || {
            blake3::hash(body).as_bytes() == digest
        });
        let decoded = decode_body(scope, In(body));
        if verified() != Some(true) {
            return Err(Unusable("its digest does not match its bytes"));
        }
        decoded
    })
}

/// `work` on a new thread of `scope` named `name`, joined by the function returned; run there
/// instead if no thread can be had. `None`: it panicked.
fn beside<'scope, T: Send + 'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    name: &str,
    work: impl Fn() -> T + Copy + Send + 'scope,
) -> impl FnOnce() -> Option<T> + 'scope {
    let thread = std::thread::Builder::new()
        .name(name.to_owned())
        .spawn_scoped(scope, work);
    move || match thread {
        Ok(thread) => thread.join().ok(),
        Err(_) => Some(work()),
    }
}

/// One edge: the node it leads to (checked against `n_nodes`) and its manifest (checked
/// once every manifest is read).
fn edge(input: &mut In<'_>, n_nodes: usize) -> Result<(u32, u32), Unusable> {
    Ok((index(input.u32()?, n_nodes, None)?, input.u32()?))
}

/// The `n_nodes` id records: strictly ascending ids (so none twice), each naming a different
/// node (so, as many as there are nodes, every node once).
fn sorted_ids(mut input: In<'_>, n_nodes: usize) -> Result<Ids, Unusable> {
    let mut seen = vec![false; n_nodes];
    let mut sorted: Vec<(ArtifactId, u32)> = Vec::with_capacity(n_nodes);
    for _ in 0..n_nodes {
        let id = input.id()?;
        let n = index(input.u32()?, n_nodes, None)?;
        if sorted.last().is_some_and(|&(last, _)| last >= id) {
            return Err(Unusable("the ids are not in ascending order"));
        }
        if std::mem::replace(&mut seen[n as usize], true) {
            return Err(Unusable("a node is listed twice"));
        }
        sorted.push((id, n));
    }
    Ok(Ids::loaded(sorted))
}

/// Everything after the digest.
fn decode_body<'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    mut input: In<'scope>,
) -> Result<(Graph, Coverage), Unusable> {
    let mut coverage = Coverage {
        through: (input.u64()?, input.id()?),
        ahead: Default::default(),
    };
    for _ in 0..input.count(40)? {
        coverage.ahead.insert(input.u64()?, input.id()?);
    }
    let n_names = input.count(4)?;
    let mut table = Vec::with_capacity(n_names);
    for _ in 0..n_names {
        let len = input.count(1)?;
        let text =
            std::str::from_utf8(input.bytes(len)?).map_err(|_| Unusable("a name is not UTF-8"))?;
        table.push(Name::new(text));
    }
    let name =
        |n: u32| -> Result<Name, Unusable> { Ok(table[index(n, table.len(), None)? as usize]) };
    let mut graph = Graph::default();
    for number in 0..input.count(4)? {
        let group = name(input.u32()?)?;
        if graph.group(group) != number as u32 {
            return Err(Unusable("a Group is listed twice"));
        }
    }
    let n_groups = graph.groups.len();
    let n_nodes = input.count(ID_BYTES + NODE_BYTES)?;
    let id_records = input.bytes(n_nodes * ID_BYTES)?;
    let ids = beside(scope, "weft-lineage-ids", move || {
        sorted_ids(In(id_records), n_nodes)
    });
    graph.nodes.reserve_exact(n_nodes);
    for _ in 0..n_nodes {
        let group = index(input.u32()?, n_groups, Some(MIXED))?;
        let first_manifest = input.u32()?;
        let (n_sources, n_derived) = (input.count(8)?, input.count(8)?);
        let mut sources = SmallVec::with_capacity(n_sources);
        for _ in 0..n_sources {
            sources.push(edge(&mut input, n_nodes)?);
        }
        let mut derived = SmallVec::with_capacity(n_derived);
        for _ in 0..n_derived {
            derived.push(edge(&mut input, n_nodes)?);
        }
        graph.nodes.push(Node {
            group,
            first_manifest,
            sources,
            derived,
        });
    }
    let n_manifests = input.count(MANIFEST_BYTES)?;
    graph.manifests.reserve_exact(n_manifests);
    // Each manifest's WorkItem and Mission, as numbers in the name table (see below).
    let mut scopes: Vec<(u32, u32)> = Vec::with_capacity(n_manifests);
    for _ in 0..n_manifests {
        let artifact = input.id()?;
        let manifest_id = input.id()?;
        let (size, sequence) = (input.u64()?, input.u64()?);
        let names = [
            input.u32()?,
            input.u32()?,
            input.u32()?,
            input.u32()?,
            input.u32()?,
        ];
        scopes.push((names[2], names[1]));
        graph.manifests.push(ManifestNode {
            artifact,
            manifest_id,
            size,
            sequence,
            group_name: name(names[0])?,
            mission: name(names[1])?,
            work_item: name(names[2])?,
            producer: name(names[3])?,
            media_type: name(names[4])?,
            group: index(input.u32()?, n_groups, None)?,
            next: index(input.u32()?, n_manifests, Some(NO_MANIFEST))?,
        });
    }
    if !input.0.is_empty() {
        return Err(Unusable("bytes after the last record"));
    }
    graph.index = ids().ok_or(Unusable("the ids thread failed"))??;
    for node in &graph.nodes {
        index(node.first_manifest, n_manifests, Some(NO_MANIFEST))?;
        for &(_, manifest) in node.sources.iter().chain(&node.derived) {
            index(manifest, n_manifests, None)?;
        }
    }
    // WorkItem and Mission lists: each manifest's node, in manifest order, as `add` pushes.
    let mut node_of = vec![u32::MAX; n_manifests];
    for (n, node) in graph.nodes.iter().enumerate() {
        let mut at = node.first_manifest;
        let mut steps = 0;
        while let Some(manifest) = graph.manifests.get(at as usize) {
            if node_of[at as usize] != u32::MAX || steps > n_manifests {
                return Err(Unusable("manifest chains overlap"));
            }
            node_of[at as usize] = n as u32;
            at = manifest.next;
            steps += 1;
        }
    }
    // Lists indexed by name number, so no name is hashed per manifest (names were checked
    // against the table above).
    let (mut work_items, mut missions) =
        (vec![Vec::new(); table.len()], vec![Vec::new(); table.len()]);
    for (&(work_item, mission), &node) in scopes.iter().zip(&node_of) {
        if node == u32::MAX {
            return Err(Unusable("a manifest belongs to no node"));
        }
        work_items[work_item as usize].push(node);
        missions[mission as usize].push(node);
    }
    for (lists, map) in [
        (work_items, &mut graph.by_work_item),
        (missions, &mut graph.by_mission),
    ] {
        for (number, list) in lists.into_iter().enumerate() {
            if !list.is_empty() {
                map.insert(table[number].as_str(), list);
            }
        }
    }
    Ok((graph, coverage))
}
