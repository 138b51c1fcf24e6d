#!/bin/sh
# Guest hook (runs in the VM after the tests): the NVMe/TCP path later fabrics work builds on.
# Exports /dev/nullb0 through the kernel's NVMe target on 127.0.0.1:4420, attaches it with the
# kernel's nvme-tcp host driver via /dev/nvme-fabrics, checks that nvme-cli and the harness's
# probe tests see a controller with the serial we set and the namespace's size, then detaches
# and tears the target down. Exit 0 = pass, 77 = skip (modules absent), other = fail.
set -u
cfg=/sys/kernel/config/nvmet
nqn=nqn.2026-11.io.rbctl:vmtest-nullb0
serial=rbctlnvmet1
port=$cfg/ports/1
sub=$cfg/subsystems/$nqn
if [ ! -d $cfg ] || [ ! -e /dev/nvme-fabrics ]; then
	echo "nvmet-tcp hook: nvmet configfs or /dev/nvme-fabrics absent"
	exit 77
fi
rc=0
teardown() {
	[ -n "${ctrl:-}" ] && echo 1 >"/sys/class/nvme/$ctrl/delete_controller" 2>/dev/null
	rm -f "$port/subsystems/$nqn" 2>/dev/null
	rmdir "$port" 2>/dev/null
	[ -d "$sub" ] && echo 0 >"$sub/namespaces/1/enable" 2>/dev/null
	rmdir "$sub/namespaces/1" "$sub" 2>/dev/null
}
fail() {
	echo "nvmet-tcp hook: $*"
	teardown
	exit 1
}
mkdir "$sub" || fail "mkdir $sub"
echo 1 >"$sub/attr_allow_any_host"
echo "$serial" >"$sub/attr_serial" || fail "cannot set attr_serial"
mkdir "$sub/namespaces/1"
printf /dev/nullb0 >"$sub/namespaces/1/device_path"
echo 1 >"$sub/namespaces/1/enable" || fail "cannot enable namespace on /dev/nullb0"
mkdir "$port"
echo tcp >"$port/addr_trtype"
echo ipv4 >"$port/addr_adrfam"
echo 127.0.0.1 >"$port/addr_traddr"
echo 4420 >"$port/addr_trsvcid"
ln -s "$sub" "$port/subsystems/$nqn" || fail "cannot link the port to the subsystem"

# Writing the options connects; reading back on the same open file says which instance.
exec 4<>/dev/nvme-fabrics
echo "transport=tcp,traddr=127.0.0.1,trsvcid=4420,nqn=$nqn" >&4 || fail "connect failed"
read -r reply <&4
exec 4<&-
inst=$(echo "$reply" | sed -n 's/.*instance=\([0-9]*\).*/\1/p')
[ -n "$inst" ] || fail "unexpected reply from /dev/nvme-fabrics: $reply"
ctrl=nvme$inst
for i in $(seq 1 50); do
	ng=$(ls -d /dev/ng"$inst"n* 2>/dev/null | head -1)
	[ -n "$ng" ] && break
	sleep 0.1
done
[ -n "$ng" ] || fail "no /dev/ng${inst}n* after connecting"
echo "nvmet-tcp hook: attached $nqn as /dev/$ctrl, namespace $ng ($(cat /sys/class/nvme/$ctrl/transport) $(cat /sys/class/nvme/$ctrl/address))"
out=$(nvme id-ctrl "/dev/$ctrl" -o json) || fail "nvme id-ctrl /dev/$ctrl failed"
echo "$out" | grep -E '"(sn|mn|ctratt)"' | sed 's/^ */nvmet-tcp hook: nvme-cli: /'
echo "$out" | grep -q "\"sn\" *: *\"$serial" || fail "nvme-cli reports another serial"
probe=/tests/tools-vmtest-probe.test
if [ -x $probe ]; then
	size=$(($(cat /sys/block/nullb0/size) * 512))
	RBCTL_TEST_NVME_CTRL=/dev/$ctrl RBCTL_TEST_NVME_NS=$ng RBCTL_TEST_NVME_SERIAL=$serial \
		RBCTL_TEST_NVME_SIZE=$size RBCTL_TEST_NVME_BLK= RBCTL_TEST_NULLB= RBCTL_TEST_RBCTL= \
		$probe -test.v -test.run 'TestVM(IdentifyController|IdentifyNamespace|NVMeCLIAgrees)$' </dev/null || rc=1
fi
teardown
exit $rc
