package nvme

// openUring opens the io_uring URING_CMD transport (nvme/uringcmd.go).
func openUring(path string, opt OpenOptions) (Transport, error) {
	t, err := OpenUringCmd(path, UringCmdOptions{QueueDepth: opt.QueueDepth, NSID: opt.NSID})
	if err != nil {
		return nil, err
	}
	return t, nil
}
