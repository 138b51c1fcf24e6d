package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Buffer pages: both sides must move their bytes from the same kind of memory. rbctl's
// buffers come from blockdev.Alloc, which asks for transparent huge pages; fio's default
// buffers are 4 KiB pages, and fio can use huge pages only through hugetlbfs
// (--mem=shmhuge, pages reserved in /proc/sys/vm/nr_hugepages). The page size decides the
// segments per request: a 1 MiB transfer from 4 KiB pages is 256 segments, which a virtio
// disk with max_segments 254 splits in two requests, and every segment costs the host its
// own mapping. On this machine fio's 1 MiB random writes ran at 1.84–2.10 GB/s from 4 KiB
// pages and 4.15–4.27 GB/s from huge pages, alternating in the same minute.
//
// -fio-mem picks fio's memory: shmhuge (huge pages; fails when none are reserved), malloc
// (4 KiB pages; benchio then keeps its own buffers in 4 KiB pages too, MADV_NOHUGEPAGE), or
// auto: shmhuge when enough huge pages are free, else malloc.

const hugePageBytes = 2 << 20

// fioBufferHugePages is how many 2 MiB huge pages one fio job at depth qd and block size bs
// needs: qd·bs rounded up to whole huge pages, + 2 for fio's alignment and bookkeeping
// (found by trying: fio-3.33 at QD 32 needs 18 pages at 1 MiB and 3 at 64 KiB; 17 and 2 fail
// with shmget ENOMEM).
func fioBufferHugePages(qd, bs int) int {
	return (qd*bs+hugePageBytes-1)/hugePageBytes + 2
}

// freeHugePages is HugePages_Free of /proc/meminfo (0 when unknown).
func freeHugePages() int {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	return parseMeminfo(string(b), "HugePages_Free")
}

// parseMeminfo returns the number after "key:" in a /proc/meminfo text (0 when absent).
func parseMeminfo(s, key string) int {
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || k != key {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			return 0
		}
		n, _ := strconv.Atoi(f[0])
		return n
	}
	return 0
}

// chooseFioMem resolves -fio-mem for the largest block size of the run.
func chooseFioMem(mode string, qd, maxBS int) (string, error) {
	need := fioBufferHugePages(qd, maxBS)
	switch mode {
	case "malloc":
		return "malloc", nil
	case "shmhuge":
		if free := freeHugePages(); free < need {
			return "", fmt.Errorf("-fio-mem shmhuge: %d huge pages free, fio needs %d (echo %d > /proc/sys/vm/nr_hugepages as root, or -fio-mem malloc)", free, need, need)
		}
		return "shmhuge", nil
	case "auto":
		if freeHugePages() >= need {
			return "shmhuge", nil
		}
		return "malloc", nil
	}
	return "", fmt.Errorf("-fio-mem %q: want auto, shmhuge or malloc", mode)
}

// resolveFioMem is the buffer memory of a run: chooseFioMem's choice when fio runs (withFio),
// else shmhuge (benchio's buffers keep their huge pages: there is no fio memory to match)
// unless mode is malloc. Before this, a run without fio (an empty -fio) silently put benchio's
// payloads in 4 KiB pages, which on a virtio disk halved the engine's 1 MiB vectored puts
// (docs/io_uring.md, "engine-put 64 KiB again; payloads in 4 KiB pages").
func resolveFioMem(mode string, withFio bool, qd, maxBS int) (string, error) {
	if withFio {
		return chooseFioMem(mode, qd, maxBS)
	}
	switch mode {
	case "malloc":
		return "malloc", nil
	case "auto", "shmhuge":
		return "shmhuge", nil
	}
	return "", fmt.Errorf("-fio-mem %q: want auto, shmhuge or malloc", mode)
}

// smallPages keeps buf in 4 KiB pages (MADV_NOHUGEPAGE) when fio runs from 4 KiB pages, so
// both sides send requests of the same segments. Call it before the memory is first touched.
func smallPages(c config, buf []byte) {
	if c.fioMem == "malloc" && len(buf) > 0 {
		unix.Madvise(buf, unix.MADV_NOHUGEPAGE)
	}
}
