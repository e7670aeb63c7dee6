#!/usr/bin/env python3
"""Writes the hwloc XML fixtures of tests/data/topo/ and their NVLink overlays.

Machines modelled on public specifications, kept small: a few PUs per NUMA
node and only the PCI devices that matter (GPUs, NICs and the bridges above
them). Run from anywhere: python3 tests/data/topo/make_fixtures.py
The output is committed; re-run it after editing this script.

PCIe link speeds are hwloc's pci_link_speed in GB/s (lanes x rate x
encoding): Gen3 x16 15.753846, Gen4 x16 31.507692, Gen5 x16 63.015385.
"""
import os

GEN3, GEN4, GEN5 = 15.753846, 31.507692, 63.015385
HERE = os.path.dirname(os.path.abspath(__file__))


def bitmap(bits):
    """hwloc's bitmap text: 32-bit words, most significant first."""
    value = 0
    for b in bits:
        value |= 1 << b
    words = []
    while True:
        words.append(value & 0xFFFFFFFF)
        value >>= 32
        if not value:
            break
    return ",".join("0x%08x" % w for w in reversed(words))


class Obj:
    def __init__(self, type_, attrs=None, infos=None):
        self.type = type_
        self.attrs = attrs or {}
        self.infos = infos or []
        self.children = []


# PCI items of a machine description.
def gpu(dev, cls=0x0302, speed=GEN4):
    return ("gpu", dev, cls, speed)


def nic(dev, ofed, speed=GEN4):
    return ("nic", dev, ofed, speed)


def switch(items, speed=GEN4):
    return ("switch", items, speed)


class Buses:
    def __init__(self, first):
        self.last = first - 1

    def take(self):
        self.last += 1
        return self.last


def pci_attrs(bus, dev, type_text, speed):
    return {"pci_busid": "0000:%02x:%02x.0" % (bus, dev), "pci_type": type_text,
            "pci_link_speed": "%f" % speed}


def bridge(bus, dev, depth, secondary, subordinate, vendor, speed):
    attrs = {"bridge_type": "1-1", "depth": str(depth),
             "bridge_pci": "0000:[%02x-%02x]" % (secondary, subordinate)}
    attrs.update(pci_attrs(bus, dev, "0604 [%s] [0000:0000] 00" % vendor, speed))
    return Obj("Bridge", attrs)


def build(item, bus, dev, buses, depth):
    """The hwloc object of one PCI item whose function is bus:dev.0."""
    kind = item[0]
    if kind == "gpu":
        _, device, cls, speed = item
        return Obj("PCIDev", pci_attrs(bus, dev, "%04x [10de:%04x] [10de:0000] a1" % (cls, device),
                                       speed))
    if kind == "nic":
        _, device, ofed, speed = item
        o = Obj("PCIDev", pci_attrs(bus, dev, "0207 [15b3:%04x] [15b3:0000] 00" % device, speed))
        o.children.append(Obj("OSDev", {"name": ofed, "osdev_type": "3"}))
        o.children.append(Obj("OSDev", {"name": "ibp%ds0" % bus, "osdev_type": "2"}))
        return o
    # A switch: its upstream port here, one downstream port per item below.
    _, items, speed = item
    secondary = buses.take()
    ports = []
    for k, child in enumerate(items):
        port_secondary = buses.take()
        below = build(child, port_secondary, 0, buses, depth + 2)
        port = bridge(secondary, k, depth + 1, port_secondary, buses.last, "1000:c010", speed)
        port.children.append(below)
        ports.append(port)
    up = bridge(bus, dev, depth, secondary, buses.last, "1000:c010", speed)
    up.children = ports
    return up


def host_bridge(base_bus, items):
    """A host bridge (root complex) on base_bus with one root port per item."""
    buses = Buses(base_bus + 1)
    ports = []
    for k, item in enumerate(items):
        secondary = buses.take()
        below = build(item, secondary, 0, buses, 2)
        port = bridge(base_bus, k + 1, 1, secondary, buses.last, "8086:0000", item[-1])
        port.children.append(below)
        ports.append(port)
    hb = Obj("Bridge", {"bridge_type": "0-1", "depth": "0",
                        "bridge_pci": "0000:[%02x-%02x]" % (base_bus, buses.last)})
    hb.children = ports
    return hb


def sets(cpus, nodes):
    return {"cpuset": bitmap(cpus), "complete_cpuset": bitmap(cpus),
            "nodeset": bitmap(nodes), "complete_nodeset": bitmap(nodes)}


def machine(host, vendor, model, packages):
    """packages: per package, a list of NUMA nodes (pus, [(base_bus, [items])])."""
    pu = 0
    numa = 0
    package_objs = []
    all_cpus, all_nodes = [], []
    for p, numas in enumerate(packages):
        pkg_cpus, pkg_nodes, dies = [], [], []
        for d, (pus, bridges) in enumerate(numas):
            cpus = list(range(pu, pu + pus))
            pu += pus
            parent = Obj("Die", dict(os_index=str(d), **sets(cpus, [numa])))
            parent.children.append(Obj("NUMANode", dict(os_index=str(numa), **sets(cpus, [numa]),
                                                        local_memory=str(64 << 30))))
            for c in cpus:
                core = Obj("Core", dict(os_index=str(c), **sets([c], [numa])))
                core.children.append(Obj("PU", dict(os_index=str(c), **sets([c], [numa]))))
                parent.children.append(core)
            for base_bus, items in bridges:
                parent.children.append(host_bridge(base_bus, items))
            dies.append(parent)
            pkg_cpus += cpus
            pkg_nodes.append(numa)
            numa += 1
        pkg = Obj("Package", dict(os_index=str(p), **sets(pkg_cpus, pkg_nodes)),
                  [("CPUVendor", vendor), ("CPUModel", model)])
        if len(dies) == 1:
            pkg.children = dies[0].children  # one NUMA node per package: no Die level
        else:
            pkg.children = dies
        package_objs.append(pkg)
        all_cpus += pkg_cpus
        all_nodes += pkg_nodes
    attrs = dict(os_index="0", **sets(all_cpus, all_nodes))
    attrs["allowed_cpuset"] = bitmap(all_cpus)
    attrs["allowed_nodeset"] = bitmap(all_nodes)
    root = Obj("Machine", attrs, [("HostName", host), ("Architecture", "x86_64")])
    root.children = package_objs
    return root


def serialize(root):
    lines = ['<?xml version="1.0" encoding="UTF-8"?>', '<!DOCTYPE topology SYSTEM "hwloc2.dtd">',
             '<topology version="2.0">']
    counter = [0]

    def write(o, depth):
        counter[0] += 1
        attrs = dict(o.attrs)
        attrs["gp_index"] = str(counter[0])
        text = " ".join('%s="%s"' % kv for kv in attrs.items())
        pad = "  " * depth
        if not o.children and not o.infos:
            lines.append('%s<object type="%s" %s/>' % (pad, o.type, text))
            return
        lines.append('%s<object type="%s" %s>' % (pad, o.type, text))
        for name, value in o.infos:
            lines.append('%s  <info name="%s" value="%s"/>' % (pad, name, value))
        for child in o.children:
            write(child, depth + 1)
        lines.append("%s</object>" % pad)

    write(root, 1)
    lines.append("</topology>")
    return "\n".join(lines) + "\n"


def gpu_bus_ids(root):
    ids = []

    def walk(o):
        if o.type == "PCIDev" and "[10de:" in o.attrs["pci_type"]:
            ids.append(o.attrs["pci_busid"])
        for c in o.children:
            walk(c)

    walk(root)
    return sorted(ids)


def write(name, root, overlay_header=None, overlay=None):
    with open(os.path.join(HERE, name + ".xml"), "w") as f:
        f.write(serialize(root))
    if overlay is not None:
        with open(os.path.join(HERE, name + ".nvlink"), "w") as f:
            f.write("# NVLink overlay for %s.xml: %s\n" % (name, overlay_header))
            f.write("# <GPU PCI bus id> <peer GPU bus id | nvswitch> <links> <NVLink generation>\n")
            for line in overlay(gpu_bus_ids(root)):
                f.write(line + "\n")


def dgx_a100():
    # DGX A100: 2x AMD EPYC 7742 in NPS4 (8 NUMA nodes), 8x A100-SXM4 (10de:20b0)
    # on 6 NVSwitches (12 NVLink3 links per GPU); 4 PCIe Gen4 switch complexes,
    # each holding two ConnectX-6 HDR NICs (15b3:101b) and, one level down
    # (its internal virtual switches), two GPUs (GPU-NIC: PXB as nvidia-smi
    # shows it), on NUMA nodes 3, 1, 7, 5 as on the real machine (GPU0-1,
    # GPU2-3, GPU4-5, GPU6-7).
    def complex_(n):
        return switch([switch([gpu(0x20b0)]), switch([gpu(0x20b0)]),
                       nic(0x101b, "mlx5_%d" % n), nic(0x101b, "mlx5_%d" % (n + 1))])
    pkg0 = [(2, []), (2, [(0x40, [complex_(2)])]), (2, []), (2, [(0x00, [complex_(0)])])]
    pkg1 = [(2, []), (2, [(0xc0, [complex_(6)])]), (2, []), (2, [(0x80, [complex_(4)])])]
    root = machine("dgx-a100", "AuthenticAMD", "AMD EPYC 7742 64-Core Processor", [pkg0, pkg1])
    write("dgx_a100", root, "8 GPUs on NVSwitch, 12 NVLink3 links each",
          lambda ids: ["%s nvswitch 12 3" % b for b in ids])


def dgx_h100():
    # DGX H100: 2x Intel Xeon Platinum 8480C (one NUMA node each), 8x H100-SXM5
    # (10de:2330, PCIe Gen5) on 4 NVSwitches (18 NVLink4 links per GPU) and 8
    # ConnectX-7 NDR NICs (15b3:1021, Gen5), named as on the real machine. Each
    # GPU shares a PCIe switch with its NIC (PIX); each switch has its own host
    # bridge.
    names = [0, 3, 4, 5, 6, 9, 10, 11]

    def pair(k):
        return switch([nic(0x1021, "mlx5_%d" % names[k], GEN5), gpu(0x2330, speed=GEN5)], GEN5)
    pkg0 = [(4, [(0x15, [pair(0)]), (0x37, [pair(1)]), (0x48, [pair(2)]), (0x59, [pair(3)])])]
    pkg1 = [(4, [(0x97, [pair(4)]), (0xb7, [pair(5)]), (0xc7, [pair(6)]), (0xd7, [pair(7)])])]
    root = machine("dgx-h100", "GenuineIntel", "Intel(R) Xeon(R) Platinum 8480C", [pkg0, pkg1])
    write("dgx_h100", root, "8 GPUs on NVSwitch, 18 NVLink4 links each",
          lambda ids: ["%s nvswitch 18 4" % b for b in ids])


def pcie_8gpu():
    # 8 PCIe GPUs (L40S, 10de:26b9, Gen4) behind 4 Gen4 switches, two per
    # socket, each switch on its own host bridge; 2x Intel Xeon; a ConnectX-6
    # NIC in each socket's first switch. No NVLink.
    def sw(nic_name=None):
        items = [gpu(0x26b9), gpu(0x26b9)]
        if nic_name:
            items.append(nic(0x101b, nic_name))
        return switch(items)
    pkg0 = [(4, [(0x10, [sw("mlx5_0")]), (0x30, [sw()])])]
    pkg1 = [(4, [(0x90, [sw("mlx5_1")]), (0xb0, [sw()])])]
    root = machine("pcie-8gpu", "GenuineIntel", "Intel(R) Xeon(R) Gold 6338", [pkg0, pkg1])
    write("pcie_8gpu", root)


def nvlink_bridge_4gpu():
    # A workstation: one AMD socket, 4 RTX A6000 (10de:2230, VGA class 0300,
    # Gen4), each on its own root port of one host bridge (PHB between any
    # two), joined in pairs (GPU0-GPU1, GPU2-GPU3) by 4-link NVLink3 bridges.
    root = machine("ws-4gpu", "AuthenticAMD", "AMD Ryzen Threadripper PRO 5975WX",
                   [[(4, [(0x00, [gpu(0x2230, 0x0300) for _ in range(4)])])]])
    write("nvlink_bridge_4gpu", root, "NVLink bridges GPU0-GPU1 and GPU2-GPU3",
          lambda ids: ["%s %s 4 3" % (ids[0], ids[1]), "%s %s 4 3" % (ids[2], ids[3])])


def two_socket_2gpu():
    # 2 Intel sockets, an A100-PCIe (10de:20f1, Gen4) on a root port of each.
    root = machine("two-socket", "GenuineIntel", "Intel(R) Xeon(R) Gold 6248",
                   [[(2, [(0x17, [gpu(0x20f1)])])], [(2, [(0x98, [gpu(0x20f1)])])]])
    write("two_socket_2gpu", root)


if __name__ == "__main__":
    dgx_a100()
    dgx_h100()
    pcie_8gpu()
    nvlink_bridge_4gpu()
    two_socket_2gpu()
