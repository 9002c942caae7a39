package mysqlbooking

// PipelineOnly makes s decide every batch on the pipeline path, so that the
// conformance suite covers it on its own.
func PipelineOnly(s *Store) { s.pipelineOnly = true }
