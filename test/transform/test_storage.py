"""Input listing (S3Prefix as a raw prefix, manifests), output names, Gzip, atomic outputs; local and s3://."""

import gzip
import json

import boto3
import pytest
from sagemaker_tfs.shared.storage import InputObject, SourceError, Storage


def tree(root, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def names(objects: list[InputObject]) -> list[str]:
    return [obj.name for obj in objects]


def test_a_local_folder_gives_every_file_under_it_in_key_order(tmp_path):
    tree(tmp_path / "in", {"b.csv": b"2", "a.csv": b"1", "sub/c.csv": b"3"})
    objects = Storage().list_inputs(str(tmp_path / "in"), "S3Prefix")
    assert names(objects) == ["a.csv", "b.csv", "sub/c.csv"]
    assert [obj.size for obj in objects] == [1, 1, 1]


def test_a_local_prefix_is_a_raw_string_prefix_as_on_s3(tmp_path):
    tree(tmp_path, {"test.csv": b"", "test_output/x.csv": b"", "other.csv": b""})
    objects = Storage().list_inputs(str(tmp_path / "test"), "S3Prefix")
    assert names(objects) == [".csv", "_output/x.csv"]


def test_a_single_file_is_named_after_itself(tmp_path):
    tree(tmp_path, {"batch/data.csv": b"1"})
    assert names(Storage().list_inputs(str(tmp_path / "batch" / "data.csv"), "S3Prefix")) == ["data.csv"]


def test_nothing_found_is_sagemakers_message(tmp_path):
    with pytest.raises(SourceError, match=f'No S3 objects found under S3 URL "{tmp_path}/none" given in input'):
        Storage().list_inputs(str(tmp_path / "none"), "S3Prefix")


def test_a_manifest_lists_keys_relative_to_its_prefix(tmp_path):
    tree(tmp_path, {"in/a.csv": b"1", "in/deep/b.csv": b"2"})
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps([{"prefix": f"{tmp_path}/in/"}, "deep/b.csv", "a.csv"]))
    objects = Storage().list_inputs(str(manifest), "ManifestFile")
    assert [(obj.location, obj.name) for obj in objects] == [
        (f"{tmp_path}/in/deep/b.csv", "deep/b.csv"),
        (f"{tmp_path}/in/a.csv", "a.csv"),
    ]


@pytest.mark.parametrize("content", ['{"prefix": "x"}', '[{"prefix": 1}, "a"]', "[]", "not json"])
def test_a_bad_manifest_is_refused(tmp_path, content):
    manifest = tmp_path / "m.json"
    manifest.write_text(content)
    with pytest.raises(SourceError, match="manifest file"):
        Storage().list_inputs(str(manifest), "ManifestFile")


def test_gzip_objects_are_decompressed_and_corrupt_ones_say_so(tmp_path):
    tree(tmp_path, {"a.gz": gzip.compress(b"x\ny\n"), "bad.gz": b"not gzip"})
    storage = Storage()
    assert storage.read_input(InputObject(str(tmp_path / "a.gz"), "a.gz", None), "Gzip")[0] == b"x\ny\n"
    with pytest.raises(OSError, match="Unable to decompress the object as Gzip"):
        storage.read_input(InputObject(str(tmp_path / "bad.gz"), "bad.gz", None), "Gzip")


def test_output_names(tmp_path):
    storage = Storage()
    assert storage.output_location("s3://b/output/", "a.csv.gz") == "s3://b/output/a.csv.gz.out"
    assert storage.output_location("s3://b/output", "d/a.csv") == "s3://b/output/d/a.csv.out"
    assert storage.output_location("s3://b", "a.csv") == "s3://b/a.csv.out"
    assert storage.output_location(str(tmp_path), "d/a.csv") == str(tmp_path / "d" / "a.csv.out")


def test_local_outputs_appear_only_when_committed_and_discard_leaves_nothing(tmp_path):
    storage = Storage()
    kept = storage.open_output(str(tmp_path / "out" / "a.out"))
    kept.write(b"data")
    assert [p.name for p in (tmp_path / "out").iterdir() if not p.name.startswith(".")] == []
    kept.commit()
    dropped = storage.open_output(str(tmp_path / "out" / "b.out"))
    dropped.write(b"partial")
    dropped.discard()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.out"]
    assert (tmp_path / "out" / "a.out").read_bytes() == b"data"


def test_s3_prefix_manifest_and_outputs_against_a_local_s3_server(s3_endpoint):
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    s3.create_bucket(Bucket="storage-test")
    for key in ("in/a.csv", "in/sub/b.csv", "in/", "in_other/c.csv", "out-of-prefix.csv"):
        s3.put_object(Bucket="storage-test", Key=key, Body=b"1,2\n")
    s3.put_object(
        Bucket="storage-test",
        Key="manifest.json",
        Body=json.dumps([{"prefix": "s3://storage-test/in/"}, "sub/b.csv"]).encode(),
    )
    storage = Storage(s3_endpoint)
    assert names(storage.list_inputs("s3://storage-test/in", "S3Prefix")) == ["a.csv", "sub/b.csv", "_other/c.csv"]
    manifest = storage.list_inputs("s3://storage-test/manifest.json", "ManifestFile")
    assert [(obj.location, obj.name) for obj in manifest] == [("s3://storage-test/in/sub/b.csv", "sub/b.csv")]
    assert storage.read_input(manifest[0], None) == (b"1,2\n", 4)
    with pytest.raises(OSError, match="Unable to read s3://storage-test/missing"):
        storage.read("s3://storage-test/missing")
    pending = storage.open_output("s3://storage-test/out/a.csv.out")
    pending.write(b"3\n")
    assert "Contents" not in s3.list_objects_v2(Bucket="storage-test", Prefix="out/")
    pending.commit()
    assert s3.get_object(Bucket="storage-test", Key="out/a.csv.out")["Body"].read() == b"3\n"


def test_an_s3_listing_error_is_a_source_error(s3_endpoint):
    with pytest.raises(SourceError, match="Unable to list the input s3://no-such-bucket/in/: .*NoSuchBucket"):
        Storage(s3_endpoint).list_inputs("s3://no-such-bucket/in/", "S3Prefix")
