package memqueue

import "slices"

// fifo is the waiting line of one room: entries in ascending sequence order,
// with O(log n) rank through a Fenwick tree over live entries. Removed
// entries leave a tombstone until the line is compacted.
type fifo struct {
	seqs     []int64
	visitors []string // "" marks a removed entry
	tree     []int64  // Fenwick tree of live flags, 1-based: tree[0] unused
	index    map[string]int64
	head     int // no live entry before head
}

func (f *fifo) len() int64 { return int64(len(f.index)) }

func (f *fifo) push(seq int64, visitor string) {
	if len(f.tree) == 0 {
		f.tree = append(f.tree, 0)
	}
	f.seqs = append(f.seqs, seq)
	f.visitors = append(f.visitors, visitor)
	i := len(f.seqs) // 1-based
	f.tree = append(f.tree, 1+f.prefix(i-1)-f.prefix(i-i&-i))
	f.index[visitor] = seq
}

// rank returns the visitor's sequence number and 1-based position.
func (f *fifo) rank(visitor string) (seq, pos int64, ok bool) {
	seq, ok = f.index[visitor]
	if !ok {
		return 0, 0, false
	}
	return seq, f.prefix(f.find(seq) + 1), true
}

func (f *fifo) remove(visitor string) {
	seq, ok := f.index[visitor]
	if !ok {
		return
	}
	f.kill(f.find(seq))
	f.skipDead()
}

// pop removes and returns the head; the line must not be empty.
func (f *fifo) pop() string {
	f.skipDead()
	v := f.visitors[f.head]
	f.kill(f.head)
	f.skipDead()
	return v
}

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
	delete(f.index, f.visitors[i])
	f.visitors[i] = ""
	for j := i + 1; j < len(f.tree); j += j & -j {
		f.tree[j]--
	}
}

// skipDead moves head past removed entries and compacts the line once more
// than half of it is dead, keeping memory proportional to the live entries.
func (f *fifo) skipDead() {
	for f.head < len(f.visitors) && f.visitors[f.head] == "" {
		f.head++
	}
	if f.head < 1024 || 2*f.head < len(f.visitors) {
		return
	}
	seqs, visitors := f.seqs[f.head:], f.visitors[f.head:]
	f.seqs, f.visitors, f.tree, f.head = nil, nil, nil, 0
	for i, v := range visitors {
		if v != "" {
			f.push(seqs[i], v)
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
