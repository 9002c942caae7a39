package memqueue

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"slices"
)

// fifo is the waiting line of one room: entries in ascending sequence order,
// with O(log n) rank through a Fenwick tree over live entries. Removed
// entries leave a tombstone until the line is compacted.
//
// The line holds no Go pointer per visitor: ids are copied into shared
// blocks (idBlocks) and found through a map from their hash. The garbage
// collector then has nothing to scan in a line of a million visitors; with
// a string per visitor in a slice and a map, marking the line took most of
// each collection and showed in the latency of every request
// (docs/benchmarks.md#the-memory-store-against-redis).
type fifo struct {
	seqs  []int64
	ids   []idRef // idRef 0 marks a removed entry
	tree  []int64 // Fenwick tree of live flags, 1-based: tree[0] unused
	head  int     // no live entry before head
	index map[uint64]int64
	// clash holds the few visitors whose id hash is already in index for
	// another visitor (about one in 10^7 at a million waiting).
	clash  map[string]int64
	seed   maphash.Seed
	mask   uint64 // of the hash: all ones; tests narrow it to force clashes
	blocks idBlocks
}

func newFIFO() fifo {
	return fifo{index: make(map[uint64]int64), clash: make(map[string]int64), seed: maphash.MakeSeed(), mask: ^uint64(0)}
}

func (f *fifo) hash(id string) uint64 { return maphash.String(f.seed, id) & f.mask }

func (f *fifo) len() int64 { return int64(len(f.index) + len(f.clash)) }

// push appends visitor with seq, above every seq in the line; the caller
// ensures the visitor is not in the line.
func (f *fifo) push(seq int64, visitor string) {
	h := f.hash(visitor)
	if _, taken := f.index[h]; taken {
		f.clash[visitor] = seq
	} else {
		f.index[h] = seq
	}
	f.insert(seq, f.blocks.add(visitor))
}

func (f *fifo) insert(seq int64, id idRef) {
	if len(f.tree) == 0 {
		f.tree = append(f.tree, 0)
	}
	f.seqs = append(f.seqs, seq)
	f.ids = append(f.ids, id)
	i := len(f.seqs) // 1-based
	f.tree = append(f.tree, 1+f.prefix(i-1)-f.prefix(i-i&-i))
}

// lookup returns the visitor's index in the line.
func (f *fifo) lookup(visitor string) (int, bool) {
	seq, ok := f.clash[visitor]
	if !ok {
		if seq, ok = f.index[f.hash(visitor)]; !ok {
			return 0, false
		}
	}
	i := f.find(seq)
	if i == len(f.seqs) || f.seqs[i] != seq || f.ids[i] == 0 || string(f.blocks.get(f.ids[i])) != visitor {
		return 0, false // another visitor with the same hash
	}
	return i, true
}

// rank returns the visitor's sequence number and 1-based position.
func (f *fifo) rank(visitor string) (seq, pos int64, ok bool) {
	i, ok := f.lookup(visitor)
	if !ok {
		return 0, 0, false
	}
	return f.seqs[i], f.prefix(i + 1), true
}

// from counts the live entries with a sequence number of seq or more.
func (f *fifo) from(seq int64) int64 { return f.len() - f.prefix(f.find(seq)) }

// swapLast swaps the places of the live entry of 0-based rank r and the
// last entry, and returns the sequence number the last one now has.
func (f *fifo) swapLast(r int64) int64 {
	i, last := f.nth(r), len(f.ids)-1
	f.ids[i], f.ids[last] = f.ids[last], f.ids[i]
	f.point(f.ids[i], f.seqs[i])
	f.point(f.ids[last], f.seqs[last])
	return f.seqs[i]
}

// nth returns the index of the live entry of 0-based rank r (< len).
func (f *fifo) nth(r int64) int {
	pos, rem := 0, r+1
	for step := 1 << bits.Len(uint(len(f.tree)-1)); step > 0; step >>= 1 {
		if next := pos + step; next < len(f.tree) && f.tree[next] < rem {
			pos, rem = next, rem-f.tree[next]
		}
	}
	return pos
}

// point makes the index find the visitor of id at seq.
func (f *fifo) point(id idRef, seq int64) {
	v := f.blocks.get(id)
	if _, ok := f.clash[string(v)]; ok {
		f.clash[string(v)] = seq
		return
	}
	f.index[maphash.Bytes(f.seed, v)&f.mask] = seq
}

func (f *fifo) remove(visitor string) {
	if i, ok := f.lookup(visitor); ok {
		f.kill(i)
		f.skipDead()
	}
}

// pop removes and returns the head; the line must not be empty.
func (f *fifo) pop() string {
	f.skipDead()
	v := string(f.blocks.get(f.ids[f.head]))
	f.kill(f.head)
	f.skipDead()
	return v
}

// scan calls fn with the index, sequence number and id of every live entry
// from the head, in order, until fn returns false. The id is valid until
// the entry is removed.
func (f *fifo) scan(fn func(i int, seq int64, id []byte) bool) {
	for i := f.head; i < len(f.ids); i++ {
		if f.ids[i] != 0 && !fn(i, f.seqs[i], f.blocks.get(f.ids[i])) {
			return
		}
	}
}

// take removes the live entry at index i (from scan) and returns its id.
// Call tidy after the last take of a scan.
func (f *fifo) take(i int) string {
	v := string(f.blocks.get(f.ids[i]))
	f.kill(i)
	return v
}

// tidy moves the head past removed entries (and compacts the line).
func (f *fifo) tidy() { f.skipDead() }

func (f *fifo) headSeq() (int64, bool) {
	if f.len() == 0 {
		return 0, false
	}
	return f.seqs[f.head], true
}

func (f *fifo) find(seq int64) int {
	i, _ := slices.BinarySearch(f.seqs, seq)
	return i
}

func (f *fifo) kill(i int) {
	id := f.blocks.get(f.ids[i]) // no string built: map lookups by string(id) do not allocate
	if _, ok := f.clash[string(id)]; ok {
		delete(f.clash, string(id))
	} else {
		delete(f.index, maphash.Bytes(f.seed, id)&f.mask) // = f.hash(string(id))
	}
	f.blocks.release(f.ids[i])
	f.ids[i] = 0
	for j := i + 1; j < len(f.tree); j += j & -j {
		f.tree[j]--
	}
}

// skipDead moves head past removed entries and compacts the line once more
// than half of it is dead, keeping memory proportional to the live entries.
func (f *fifo) skipDead() {
	for f.head < len(f.ids) && f.ids[f.head] == 0 {
		f.head++
	}
	if f.head < 1024 || 2*f.head < len(f.ids) {
		return
	}
	seqs, ids := f.seqs[f.head:], f.ids[f.head:]
	f.seqs, f.ids, f.tree, f.head = nil, nil, nil, 0
	for i, id := range ids {
		if id != 0 {
			f.insert(seqs[i], id)
		}
	}
}

// prefix returns the number of live entries among the first n.
func (f *fifo) prefix(n int) int64 {
	var sum int64
	for ; n > 0; n -= n & -n {
		sum += f.tree[n]
	}
	return sum
}

// idRef locates an id in idBlocks: block number << 32 | offset + 1 (0 is
// no id).
type idRef uint64

// idBlocks stores ids back to back, each after its length as a uvarint, in
// blocks of idBlockSize bytes (an id longer than that gets a block of its
// own). A block is dropped once every id in it is released; ids are
// released roughly in the order they were added (a queue), so few
// half-dead blocks linger.
type idBlocks struct {
	blocks [][]byte
	live   []int // ids not yet released, per block
}

const idBlockSize = 64 << 10

func (b *idBlocks) add(id string) idRef {
	need := binary.MaxVarintLen64 + len(id)
	n := len(b.blocks)
	if n == 0 || cap(b.blocks[n-1])-len(b.blocks[n-1]) < need {
		b.blocks = append(b.blocks, make([]byte, 0, max(idBlockSize, need)))
		b.live = append(b.live, 0)
		n++
	}
	blk := b.blocks[n-1]
	off := len(blk)
	blk = binary.AppendUvarint(blk, uint64(len(id)))
	b.blocks[n-1] = append(blk, id...)
	b.live[n-1]++
	return idRef(uint64(n-1)<<32 | uint64(off+1))
}

// get returns the id's bytes, valid until it is released.
func (b *idBlocks) get(r idRef) []byte {
	blk := b.blocks[r>>32][uint32(r)-1:]
	n, k := binary.Uvarint(blk)
	return blk[k : k+int(n)]
}

func (b *idBlocks) release(r idRef) {
	i := int(r >> 32)
	if b.live[i]--; b.live[i] == 0 && i < len(b.blocks)-1 {
		b.blocks[i] = nil
	}
}
