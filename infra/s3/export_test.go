package s3

// SetForceSidecar makes StartEmbedded keep metadata in a sidecar directory
// even where extended attributes work.
func SetForceSidecar(on bool) { forceSidecar = on }
