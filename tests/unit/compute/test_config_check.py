"""fleetcache.compute.config_check: whole-config validation for --check-config and start-up."""

from __future__ import annotations

import io
import pathlib
import shutil

import pytest
from oslo_config import cfg

from fleetcache.common import config, exception
from fleetcache.compute import config_check

BACKEND_TOOLS = {"lvcreate", "lvremove", "lvs", "vgs", "rbd", "ploop"}


def host_without(*missing: str) -> config_check.backends.Which:
    """A ``which`` for a host lacking ``missing`` (the lvm/rbd/ploop tools by default)."""
    gone = set(missing) or BACKEND_TOOLS

    def which(tool: str) -> str | None:
        return None if tool in gone else (shutil.which(tool) or f"/usr/bin/{tool}")

    return which


def host_with_everything(tool: str) -> str | None:
    return f"/usr/sbin/{tool}"


def load(tmp_path: pathlib.Path, text: str) -> cfg.ConfigOpts:
    path = tmp_path / "compute.conf"
    path.write_text(text)
    c = cfg.ConfigOpts()
    config.register_all(c)
    c(["--config-file", str(path)])
    return c


def rules(problems: list[config_check.Problem]) -> set[tuple[str, str, str]]:
    return {(p.severity, p.option, p.rule) for p in problems}


def test_default_configuration_is_clean_on_this_host(tmp_path: pathlib.Path) -> None:
    """The real host: qemu-img and cp are installed (qemu-utils), so no problem at all."""
    conf = load(tmp_path, "")
    assert config_check.check_config(conf, strict=True) == []
    out = io.StringIO()
    assert config_check.main_check_config(conf, out) == 0
    assert "configuration valid: 0 error(s), 0 warning(s)" in out.getvalue()
    config_check.enforce_config(conf)


@pytest.mark.parametrize(
    ("mapping", "rule"),
    [
        ("qcow2:raw, qcow2:qcow2", "ambiguous source"),
        ("raw:rbd, raw:lvm", "ambiguous source"),
        ("lvm:rbd, rbd:rbd", "lvm/rbd as a source"),
        ("raw:zfs", "unknown backend"),
        ("iso9660:raw", "unknown source format"),
        ("raw-lvm", "malformed entry"),
    ],
)
def test_check_config_exits_1_naming_option_and_rule(
    tmp_path: pathlib.Path, mapping: str, rule: str
) -> None:
    conf = load(tmp_path, f"[libvirt]\nimages_type_mapping = {mapping}\n")
    out = io.StringIO()
    assert config_check.main_check_config(conf, out) == 1
    assert "ERROR: [libvirt] images_type_mapping: " in out.getvalue()
    assert f"(rule: {rule})" in out.getvalue()
    with pytest.raises(exception.InvalidConfiguration, match=r"images_type_mapping"):
        config_check.enforce_config(conf)


def test_missing_lvm_tools_warn_in_check_mode_and_fail_start_up(tmp_path: pathlib.Path) -> None:
    conf = load(tmp_path, "[libvirt]\nimages_type = lvm\nimages_volume_group = vg0\n")
    problems = config_check.check_config(conf, strict=False, which=host_without())
    assert rules(problems) == {("warning", "[libvirt] images_type", "backend tools present")}
    assert "backend lvm needs lvcreate, lvremove, lvs, vgs" in str(problems[0])
    assert config_check.main_check_config(conf, io.StringIO()) == 0  # warnings only
    with pytest.raises(exception.InvalidConfiguration, match="backend lvm needs lvcreate"):
        config_check.enforce_config(conf, which=host_without())


def test_mapped_backend_tools_are_checked_under_the_mapping_option(
    tmp_path: pathlib.Path,
) -> None:
    conf = load(tmp_path, "[libvirt]\nimages_type_mapping = raw:lvm, ploop:ploop\n")
    problems = config_check.check_config(conf, strict=True, which=host_without())
    assert rules(problems) == {
        ("error", "[libvirt] images_volume_group", "lvm backend options"),
        ("error", "[libvirt] virt_type", "ploop backend options"),
        ("error", "[libvirt] images_type_mapping", "backend tools present"),
    }
    messages = " ".join(str(p) for p in problems)
    assert "backend lvm needs" in messages and "backend ploop needs ploop" in messages


def test_ploop_with_parallels_and_tools_only_warns_not_implemented(
    tmp_path: pathlib.Path,
) -> None:
    conf = load(tmp_path, "[libvirt]\nvirt_type = parallels\nimages_type = ploop\n")
    problems = config_check.check_config(conf, strict=True, which=host_with_everything)
    assert rules(problems) == {("warning", "[libvirt] images_type", "backend implemented")}
    config_check.enforce_config(conf, which=host_with_everything)


def test_rbd_fails_start_up_without_rbd_tools(tmp_path: pathlib.Path) -> None:
    conf = load(tmp_path, "[libvirt]\nimages_type = rbd\n")
    with pytest.raises(exception.InvalidConfiguration, match="backend rbd needs rbd"):
        config_check.enforce_config(conf, which=host_without("rbd"))
    config_check.enforce_config(conf, which=host_with_everything)


def test_rbd_needs_force_raw_images_as_nova(tmp_path: pathlib.Path) -> None:
    conf = load(tmp_path, "[DEFAULT]\nforce_raw_images = false\n[libvirt]\nimages_type = rbd\n")
    problems = config_check.check_config(conf, strict=False, which=host_with_everything)
    assert ("error", "[DEFAULT] force_raw_images", "rbd needs raw images") in rules(problems)


def test_missing_qemu_img_fails_start_up(tmp_path: pathlib.Path) -> None:
    conf = load(tmp_path, "")
    problems = config_check.check_config(conf, strict=False, which=host_without("qemu-img"))
    assert rules(problems) == {
        ("warning", "[libvirt] images_type", "backend tools present"),
        ("warning", "[compute] image_type_exclude_list", "qemu-img for images with a header"),
    }
    with pytest.raises(exception.InvalidConfiguration,
                       match="backend qcow2 needs qemu-img, not found on this host: install "
                       "qemu-utils"):
        config_check.enforce_config(conf, which=host_without("qemu-img"))


def test_flat_without_qemu_img_starts_accepting_raw_content_only(tmp_path: pathlib.Path) -> None:
    conf = load(tmp_path, "[libvirt]\nimages_type = flat\n")
    problems = config_check.check_config(conf, strict=True, which=host_without("qemu-img"))
    assert rules(problems) == {
        ("warning", "[compute] image_type_exclude_list", "qemu-img for images with a header")}
    assert ("qemu-img is not installed: only raw images (raw, iso, ami, aki, ari) can be "
            "accepted, qcow2, vdi, vhd, vhdx, vmdk images are refused") in str(problems[0])
    config_check.enforce_config(conf, which=host_without("qemu-img"))


def test_excluding_every_type_with_a_header_silences_the_qemu_img_warning(
    tmp_path: pathlib.Path,
) -> None:
    conf = load(tmp_path, "[libvirt]\nimages_type = raw\n"
                "[compute]\nimage_type_exclude_list = qcow2, vdi, vhd, vhdx, vmdk\n")
    assert config_check.check_config(conf, strict=True, which=host_without("qemu-img")) == []


def test_vmdk_types_the_inspector_refuses_are_flagged(tmp_path: pathlib.Path) -> None:
    conf = load(tmp_path, "[compute]\nvmdk_allowed_types = streamOptimized, monolithicFlat\n")
    problems = config_check.check_config(conf, strict=True)
    assert rules(problems) == {("warning", "[compute] vmdk_allowed_types", "inspector VMDK types")}
    assert "monolithicFlat never pass" in str(problems[0])


def test_unknown_excluded_image_type_is_flagged(tmp_path: pathlib.Path) -> None:
    conf = load(tmp_path, "[compute]\nimage_type_exclude_list = qcow2, qcow3\n")
    problems = config_check.check_config(conf, strict=True)
    assert rules(problems) == {
        ("warning", "[compute] image_type_exclude_list", "known image types")
    }


def test_invalid_images_type_is_refused_by_oslo_config(tmp_path: pathlib.Path) -> None:
    conf = load(tmp_path, "[libvirt]\nimages_type = zfs\n")
    with pytest.raises(cfg.ConfigFileValueError):
        conf.libvirt.images_type  # noqa: B018


@pytest.mark.parametrize("floor", ["lots", "100%", "5X", "-1"])
def test_bad_disk_free_floor_is_reported_by_check_config_and_stops_start_up(
        tmp_path: pathlib.Path, floor: str) -> None:
    conf = load(tmp_path, f"[image_cache]\ndisk_free_floor = {floor}\n")
    out = io.StringIO()
    assert config_check.main_check_config(conf, out) == 1
    [line] = [x for x in out.getvalue().splitlines() if "disk_free_floor" in x]
    assert line.startswith("ERROR: [image_cache] disk_free_floor: [image_cache] "
                           f"disk_free_floor = {floor!r}")
    assert line.endswith("(rule: bytes or a percentage)")
    with pytest.raises(exception.InvalidConfiguration, match="disk_free_floor"):
        config_check.enforce_config(conf, which=host_with_everything)


@pytest.mark.parametrize("floor", ["0", "500M", "1GiB", "10%", "4096"])
def test_good_disk_free_floor_passes(tmp_path: pathlib.Path, floor: str) -> None:
    conf = load(tmp_path, f"[image_cache]\ndisk_free_floor = {floor}\n")
    assert not [p for p in config_check.check_config(conf, strict=True)
                if "disk_free_floor" in p.option]


def test_peer_tls_set_in_part_or_unloadable_is_an_error(tmp_path: pathlib.Path) -> None:
    conf = load(tmp_path, f"[image_cache]\npeer_ssl_cert_file = {tmp_path}/c.pem\n")
    assert ("error", "[image_cache] peer_ssl_*", "all or none") in rules(
        config_check.check_config(conf, strict=False))
    conf = load(tmp_path, f"[image_cache]\npeer_ssl_cert_file = {tmp_path}/c.pem\n"
                f"peer_ssl_key_file = {tmp_path}/c.key\npeer_ssl_ca_file = {tmp_path}/ca.pem\n")
    assert ("error", "[image_cache] peer_ssl_*", "PEM files that load") in rules(
        config_check.check_config(conf, strict=False))
