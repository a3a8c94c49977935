"""RFC 6962 / RFC 9162 Merkle tree math over stored complete subtrees. Pure: no I/O.

The store keeps the hash of every *complete, aligned* subtree, addressed ``(level, index)``: node
``(level, i)`` covers leaves ``[i * 2**level, (i + 1) * 2**level)``; level 0 nodes are leaf hashes.
Every proof hash is the hash of a leaf range that is a subtree of the RFC 6962 tree, and such a range
decomposes into O(log n) stored nodes, so proofs never rehash the log. Proofs are produced as leaf
*ranges* (:func:`inclusion_proof_ranges`, :func:`consistency_proof_ranges`), the nodes to fetch are
:func:`required_nodes`, and :func:`assemble` folds them into proof hashes. Verification follows
transparency-dev/merkle ``proof/verify.go``. See ``docs/merkle.md``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence

from trustscore.errors import InconsistencyError, InvalidInput, ProofError

HASH_SIZE = 32
MAX_INDEX = 2**62  # far beyond any log; keeps log indexes and sizes inside PostgreSQL's bigint
EMPTY_ROOT = hashlib.sha256(b"").digest()

NodeId = tuple[int, int]
"""A stored complete subtree: ``(level, index)``."""
LeafRange = tuple[int, int]
"""A half-open leaf range ``[begin, end)``."""


# --- hashing -----------------------------------------------------------------------------------------


def leaf_hash(data: bytes) -> bytes:
    """RFC 6962 leaf hash: SHA-256(0x00 || data)."""
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """RFC 6962 interior node hash: SHA-256(0x01 || left || right)."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def root_from_leaf_hashes(hashes: Sequence[bytes]) -> bytes:
    """Reference MTH of a whole tree, level by level in O(n); the empty tree's root is SHA-256("")."""
    _check_hashes(hashes, InvalidInput, "leaf hash")
    if not hashes:
        return EMPTY_ROOT
    sha = hashlib.sha256
    level = list(hashes)
    while len(level) > 1:
        # Pairing level by level and promoting an odd last node is exactly RFC 6962's MTH, because
        # every left subtree in the recursive definition is perfect.
        paired = [sha(b"\x01" + level[i] + level[i + 1]).digest() for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0]


def complete_nodes(leaf_hashes: Sequence[bytes]) -> dict[NodeId, bytes]:
    """Every complete aligned subtree of the tree of ``leaf_hashes`` (what the store holds), in O(n)."""
    _check_hashes(leaf_hashes, InvalidInput, "leaf hash")
    out: dict[NodeId, bytes] = {}
    level, row = 0, list(leaf_hashes)
    while row:
        out.update(((level, i), h) for i, h in enumerate(row))
        row = [node_hash(row[i], row[i + 1]) for i in range(0, len(row) - 1, 2)]
        level += 1
    return out


# --- ranges and stored nodes -------------------------------------------------------------------------


def range_nodes(begin: int, end: int) -> list[NodeId]:
    """The aligned complete subtrees that exactly cover leaves ``[begin, end)``, left to right."""
    if not (type(begin) is int and type(end) is int and 0 <= begin <= end):  # the fast path of a proof
        _check_int(begin, "begin")
        _check_int(end, "end")
        if begin > end:
            raise InvalidInput(f"leaf range [{begin}, {end}) is reversed")
    width = end - begin
    if (
        width and not width & (width - 1) and not begin & (width - 1)
    ):  # one aligned subtree: most proof ranges
        level = width.bit_length() - 1
        return [(level, begin >> level)]
    out: list[NodeId] = []
    while begin < end:
        level = (end - begin).bit_length() - 1
        if begin:
            level = min(level, (begin & -begin).bit_length() - 1)
        out.append((level, begin >> level))
        begin += 1 << level
    return out


def frontier_nodes(size: int) -> list[NodeId]:
    """The complete subtrees of a tree of ``size`` leaves, left to right: what :func:`extend` needs."""
    return range_nodes(0, size)


def root_ranges(size: int) -> list[LeafRange]:
    """The one leaf range whose hash is the root of a tree of ``size`` (none for the empty tree)."""
    _check_int(size, "tree size")
    return [(0, size)] if size else []


def inclusion_proof_ranges(index: int, size: int) -> list[LeafRange]:
    """Leaf ranges whose hashes form the RFC 9162 inclusion proof of leaf ``index``, bottom-up."""
    _check_int(index, "leaf index")
    _check_int(size, "tree size")
    if index >= size:
        raise InvalidInput(f"leaf index {index} is not in a tree of size {size}")
    ranges: list[LeafRange] = []
    lo, hi = 0, size
    while hi - lo > 1:  # walk down from the root; RFC 9162 PATH lists the siblings bottom-up
        mid = lo + _split(hi - lo)
        if index < mid:
            ranges.append((mid, hi))
            hi = mid
        else:
            ranges.append((lo, mid))
            lo = mid
    ranges.reverse()
    return ranges


def consistency_proof_ranges(size1: int, size2: int) -> list[LeafRange]:
    """Leaf ranges whose hashes form the RFC 9162 consistency proof from ``size1`` to ``size2``.

    Empty when ``size1 == size2`` or ``size1 == 0`` (no proof exists or is needed).
    """
    _check_int(size1, "size1")
    _check_int(size2, "size2")
    if size1 > size2:
        raise InvalidInput(f"no consistency proof from size {size1} to the smaller size {size2}")
    if size1 in (0, size2):
        return []
    ranges: list[LeafRange] = []
    lo, hi, whole = 0, size2, True
    while hi != size1:  # RFC 9162 SUBPROOF, walking down from the root
        mid = lo + _split(hi - lo)
        if size1 <= mid:
            ranges.append((mid, hi))
            hi = mid
        else:
            ranges.append((lo, mid))
            lo, whole = mid, False
    if not whole:
        ranges.append((lo, hi))
    ranges.reverse()
    return ranges


def required_nodes(ranges: Iterable[LeafRange]) -> set[NodeId]:
    """The stored nodes :func:`assemble` needs for ``ranges``."""
    return {node for begin, end in ranges for node in range_nodes(begin, end)}


def assemble(ranges: Iterable[LeafRange], nodes: Mapping[NodeId, bytes]) -> list[bytes]:
    """The hash of each range, folded from its stored complete subtrees.

    Each range must be a subtree of an RFC 6962 tree (its decomposition strictly shrinks left to
    right); then MTH(D[a:b]) = node_hash(first, MTH(rest)), so the fold runs from the right.
    """
    out: list[bytes] = []
    for begin, end in ranges:
        ids = range_nodes(begin, end)
        if len(ids) == 1:
            out.append(_lookup(nodes, ids[0]))
            continue
        if not ids:
            raise InvalidInput(f"leaf range [{begin}, {end}) is empty")
        if any(ids[i][0] <= ids[i + 1][0] for i in range(len(ids) - 1)):
            raise InvalidInput(f"leaf range [{begin}, {end}) is not a subtree of an RFC 6962 tree")
        h = _lookup(nodes, ids[-1])
        for node in reversed(ids[:-1]):
            h = node_hash(_lookup(nodes, node), h)
        out.append(h)
    return out


def root_from_nodes(size: int, nodes: Mapping[NodeId, bytes]) -> bytes:
    """The root of a tree of ``size`` from its stored nodes (``required_nodes(root_ranges(size))``)."""
    ranges = root_ranges(size)
    return assemble(ranges, nodes)[0] if ranges else EMPTY_ROOT


def extend(
    size: int, frontier: Sequence[bytes], new_leaf_hashes: Iterable[bytes]
) -> tuple[list[tuple[int, int, bytes]], list[bytes]]:
    """Append leaves to a tree of ``size`` whose ``frontier`` (hashes of :func:`frontier_nodes`) is given.

    Returns every newly completed node as ``(level, index, hash)`` -- including the level-0 leaf
    nodes -- in the order they complete, and the frontier of the grown tree.
    """
    ids = frontier_nodes(size)
    if len(frontier) != len(ids):
        raise InvalidInput(f"a tree of size {size} has a frontier of {len(ids)} hashes, not {len(frontier)}")
    _check_hashes(frontier, InvalidInput, "frontier hash")
    stack = [(level, index, h) for (level, index), h in zip(ids, frontier, strict=True)]
    completed: list[tuple[int, int, bytes]] = []
    for leaf in new_leaf_hashes:
        if len(leaf) != HASH_SIZE:
            raise InvalidInput(f"leaf hash {size} is {len(leaf)} bytes, not {HASH_SIZE}")
        level, index, h = 0, size, leaf
        completed.append((level, index, h))
        while stack and stack[-1][0] == level:  # the top of the stack is our left sibling
            h = node_hash(stack.pop()[2], h)
            level, index = level + 1, index >> 1
            completed.append((level, index, h))
        stack.append((level, index, h))
        size += 1
    return completed, [h for _, _, h in stack]


# --- proofs from an in-memory tree (tests, offline tools) ----------------------------------------------


def inclusion_proof(index: int, size: int, leaf_hashes: Sequence[bytes]) -> list[bytes]:
    """Inclusion proof of leaf ``index`` in the tree of the first ``size`` of ``leaf_hashes``."""
    ranges = inclusion_proof_ranges(index, size)
    return assemble(ranges, _nodes_from_leaves(required_nodes(ranges), size, leaf_hashes))


def consistency_proof(size1: int, size2: int, leaf_hashes: Sequence[bytes]) -> list[bytes]:
    """Consistency proof between the trees of the first ``size1`` and ``size2`` of ``leaf_hashes``."""
    ranges = consistency_proof_ranges(size1, size2)
    return assemble(ranges, _nodes_from_leaves(required_nodes(ranges), size2, leaf_hashes))


def _nodes_from_leaves(ids: Iterable[NodeId], size: int, leaf_hashes: Sequence[bytes]) -> dict[NodeId, bytes]:
    if size > len(leaf_hashes):
        raise InvalidInput(f"tree size {size} exceeds the {len(leaf_hashes)} leaves given")
    return {(lv, i): root_from_leaf_hashes(leaf_hashes[i << lv : (i + 1) << lv]) for lv, i in ids}


# --- verification ------------------------------------------------------------------------------------


def root_from_inclusion_proof(leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes]) -> bytes:
    """The root implied by an inclusion proof; raises :class:`ProofError` if the proof is malformed."""
    if not (_is_uint(index) and _is_uint(size)):
        raise ProofError(f"leaf index {index!r} and tree size {size!r} must be non-negative integers")
    if index >= size:
        raise ProofError(f"leaf index {index} is beyond tree size {size}", index=index, size=size)
    if len(leaf_hash) != HASH_SIZE:
        raise ProofError(f"leaf hash is {len(leaf_hash)} bytes, not {HASH_SIZE}")
    _check_hashes(proof, ProofError, "inclusion proof hash")
    inner = (index ^ (size - 1)).bit_length()
    border = (index >> inner).bit_count()
    if len(proof) != inner + border:
        raise ProofError(
            f"inclusion proof for leaf {index} of {size} has {len(proof)} hashes, not {inner + border}",
            index=index,
            size=size,
            proof=list(proof),
        )
    h = _chain_inner(leaf_hash, proof[:inner], index)
    return _chain_border_right(h, proof[inner:])


def verify_inclusion(leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes) -> bytes:
    """Return ``root`` if ``proof`` shows leaf ``index`` of a tree of ``size`` is ``leaf_hash``."""
    calculated = root_from_inclusion_proof(leaf_hash, index, size, proof)
    if calculated != root:
        raise ProofError(
            f"inclusion proof for leaf {index} does not lead to the root of the tree of size {size}",
            index=index,
            size=size,
            root=root,
            calculated_root=calculated,
            proof=list(proof),
        )
    return root


def root_from_consistency_proof(size1: int, size2: int, proof: Sequence[bytes], root1: bytes) -> bytes:
    """The root of the tree of ``size2`` implied by a consistency proof from (``size1``, ``root1``).

    Raises :class:`ProofError` if the proof is malformed or does not reproduce ``root1``, and
    :class:`InconsistencyError` if ``size2 < size1``. A proof from the empty tree is meaningless and
    rejected, as in transparency-dev/merkle (callers treat size 0 specially).
    """
    return _consistency(size1, size2, proof, root1, None)


def verify_consistency(size1: int, size2: int, proof: Sequence[bytes], root1: bytes, root2: bytes) -> bytes:
    """Return ``root2`` if ``proof`` shows the tree (``size2``, ``root2``) extends (``size1``, ``root1``).

    Raises :class:`InconsistencyError` when the proof shows the trees disagree (or the tree shrank)
    and :class:`ProofError` when the proof is malformed; both carry both roots and the proof.
    """
    calculated = _consistency(size1, size2, proof, root1, root2)
    if calculated != root2:
        raise InconsistencyError(
            f"consistency proof from size {size1} does not lead to the root of size {size2}",
            old=(size1, root1),
            new=(size2, root2),
            proof=list(proof),
        )
    return root2


def _consistency(size1: int, size2: int, proof: Sequence[bytes], root1: bytes, root2: bytes | None) -> bytes:
    evidence = {"old": (size1, root1), "new": (size2, root2), "proof": list(proof)}

    def malformed(message: str) -> ProofError:
        return ProofError(message, **evidence)

    def inconsistent(message: str) -> InconsistencyError:
        return InconsistencyError(message, old=(size1, root1), new=(size2, root2), proof=list(proof))

    if not (_is_uint(size1) and _is_uint(size2)):
        raise malformed(f"tree sizes {size1!r} and {size2!r} must be non-negative integers")
    if size2 < size1:
        raise inconsistent(f"tree size {size2} is smaller than the earlier size {size1}")
    if size1 == 0:
        raise malformed("a consistency proof from the empty tree is meaningless")
    if size1 == size2:
        if proof:
            raise malformed(f"sizes are equal ({size1}) but the consistency proof is not empty")
        if root2 is not None and root1 != root2:
            raise inconsistent(f"two different roots for the same tree size {size1}")
        return root1
    if not proof:
        raise malformed(f"empty consistency proof from size {size1} to {size2}")
    for i, h in enumerate(proof):
        if len(h) != HASH_SIZE:
            raise malformed(f"consistency proof hash {i} is {len(h)} bytes, not {HASH_SIZE}")

    inner = ((size1 - 1) ^ (size2 - 1)).bit_length()
    border = ((size1 - 1) >> inner).bit_count()
    shift = (size1 & -size1).bit_length() - 1
    inner -= shift  # shift < inner because size1 < size2
    # The proof starts with the hash of the largest perfect subtree ending at size1, unless that
    # subtree is the whole tree of size1 (size1 a power of two), whose hash is root1.
    seed, start = (root1, 0) if size1 == 1 << shift else (proof[0], 1)
    if len(proof) != start + inner + border:
        raise malformed(
            f"consistency proof from size {size1} to {size2} has {len(proof)} hashes, "
            f"not {start + inner + border}"
        )
    rest = proof[start:]
    mask = (size1 - 1) >> shift
    hash1 = _chain_border_right(_chain_inner_right(seed, rest[:inner], mask), rest[inner:])
    if hash1 != root1:
        raise inconsistent(f"consistency proof does not lead to the root of size {size1}")
    return _chain_border_right(_chain_inner(seed, rest[:inner], mask), rest[inner:])


def _chain_inner(seed: bytes, proof: Sequence[bytes], index: int) -> bytes:
    for i, h in enumerate(proof):
        seed = node_hash(seed, h) if (index >> i) & 1 == 0 else node_hash(h, seed)
    return seed


def _chain_inner_right(seed: bytes, proof: Sequence[bytes], index: int) -> bytes:
    """Like :func:`_chain_inner` but only the left siblings: the earlier version of the subtree."""
    for i, h in enumerate(proof):
        if (index >> i) & 1:
            seed = node_hash(h, seed)
    return seed


def _chain_border_right(seed: bytes, proof: Sequence[bytes]) -> bytes:
    for h in proof:
        seed = node_hash(h, seed)
    return seed


# --- helpers -----------------------------------------------------------------------------------------


def _split(n: int) -> int:
    """The largest power of two strictly less than ``n`` (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


def _is_uint(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_int(value: int, what: str) -> None:
    if not _is_uint(value):
        raise InvalidInput(f"{what} must be a non-negative integer, not {value!r}")


def _check_hashes(hashes: Sequence[bytes], error: type[InvalidInput | ProofError], what: str) -> None:
    for i, h in enumerate(hashes):
        if len(h) != HASH_SIZE:
            raise error(f"{what} {i} is {len(h)} bytes, not {HASH_SIZE}")


def _lookup(nodes: Mapping[NodeId, bytes], node: NodeId) -> bytes:
    try:
        h = nodes[node]
    except KeyError:
        raise InvalidInput(f"stored node (level {node[0]}, index {node[1]}) was not supplied") from None
    if len(h) != HASH_SIZE:
        raise InvalidInput(f"stored node (level {node[0]}, index {node[1]}) is {len(h)} bytes")
    return h
