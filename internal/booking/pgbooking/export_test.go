package pgbooking

// PipelineOnly makes s decide every batch on the pipeline path, so that the
// conformance suite and the benchmark cover it on its own.
func PipelineOnly(s *Store) { s.pipelineOnly = true }
