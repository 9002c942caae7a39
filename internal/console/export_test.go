package console

// Snapshot and SampleOnce let the benchmarks time one live tick and one
// history sample.
func (k *Console) Snapshot() Live { return k.snapshot() }
func (k *Console) SampleOnce()    { k.sampleOnce() }
