package gateway

// SetForceSidecar makes Start keep metadata in a sidecar directory
// even where extended attributes work.
func SetForceSidecar(on bool) { forceSidecar = on }
