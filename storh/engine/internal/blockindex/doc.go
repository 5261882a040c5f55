// Package blockindex holds the data structures of a blocked index (layout
// 1 of the engine's secondary indexes): the sorted blocks of entry keys,
// chained from a head block; the journal of changes not folded into them
// yet; the journal decoded in memory (views and their segments); a write
// transaction's own changes (Pending); and the cursors that read all of
// them merged as one sorted run of keys. The engine decides which index
// a collection has, when a fold runs and what its failure means; this
// package knows how the bytes are laid out and how they are read and
// rewritten. The file format is described in block.go (blocks) and
// journal.go (journal records); it is the engine's format 3.
//
// # Basics
//
// Everything works on kv.Bucket, the storage contract, inside the
// caller's transaction: one bucket holds an index's blocks, another its
// journal.
//
//   - Reading: NewBlockCursor walks the blocks alone; NewCursor merges
//     them with Sources of changes, in rising precedence: a View's
//     (View.Source), a flushed Segment's (SegmentSource), and Pending's.
//     Both have the moves of a kv.Cursor, and a key they return is valid
//     until their next move.
//   - Writing: a transaction Adds its changes to a Pending and, at flush,
//     Journals them as records of the journal, getting the Segment it
//     reads them from until it commits and publishes them
//     (Mem.PublishCommit).
//   - Views: Views holds, per index, a Mem whose View serves every
//     snapshot between two folds; Mem.View returns one that covers a
//     snapshot, decoding from the journal only what the views in memory
//     lack.
//   - Folding: Fold rewrites the blocks a view's changes touch, in steps
//     of a bounded size that resume from the key it returns; DropFolded
//     then removes the folded records, and Mem.PublishFold the folded
//     changes from memory. Chain rewrites blocks of version 1 (format 2)
//     as a chain. WriteBlocks fills an empty bucket with packed blocks.
//   - Checking: Check walks the blocks and the journal and reports the
//     first structural damage.
//
// # Caveats
//
// Damage a read meets (a damaged block, or one missing from the chain)
// ends the walk as if the index ended there, calls the cursor's fail
// callback once, and stays in Err: an answer read past damage must never
// be used, so a caller that cannot wait for the transaction to fail (a
// unique check) asks Err. Damage errors wrap errs.ErrCorrupt (reads) or
// ErrDamagedBlock (writes and Check). Errors of the store are returned as
// the store gave them; the engine maps them to its sentinels.
//
// A View and a Segment are never changed once made: they are shared by
// every transaction of the process without locks. Mem orders its own
// publications; the caller orders a commit's publication before the
// next writer begins, and never publishes a change that could still
// roll back.
//
// The package does not count entries, keep sequences or decide when to
// fold: those live in the engine's index definition (State is what Check
// needs of it).
package blockindex
