"""Remote inputs from Python: ``s3://`` URLs (a local S3 endpoint, moto) given to ``view``,
``flagstat``, ``idxstats`` and ``read_bam`` give what the local file gives; a missing object
raises :class:`sortase.InputError` naming the URL."""

from __future__ import annotations

from pathlib import Path

import pytest

import sortase

BUCKET = "sortase-remote"
REGION = "chr1:1-100000"


@pytest.fixture(scope="module")
def s3_bam(large_bam: Path):
    moto_server = pytest.importorskip("moto.server")
    boto3 = pytest.importorskip("boto3")
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    client.create_bucket(Bucket=BUCKET)
    for path in (large_bam, Path(f"{large_bam}.bai")):
        client.put_object(Bucket=BUCKET, Key=path.name, Body=path.read_bytes())
    env = {"AWS_ENDPOINT_URL": endpoint, "AWS_REGION": "us-east-1",
           "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    mp = pytest.MonkeyPatch()
    for k, v in env.items():
        mp.setenv(k, v)
    yield f"s3://{BUCKET}/{large_bam.name}"
    mp.undo()
    server.stop()


def test_s3_view_flagstat_idxstats_equal_local(s3_bam: str, large_bam: Path) -> None:
    local = sortase.view(large_bam, count=True, regions=[REGION]).count
    assert local > 0
    assert sortase.view(s3_bam, count=True, regions=[REGION]).count == local
    assert sortase.view(s3_bam, count=True, min_mapq=30, threads=2).count == \
        sortase.view(large_bam, count=True, min_mapq=30, threads=2).count
    assert sortase.flagstat(s3_bam) == sortase.flagstat(large_bam)
    assert sortase.idxstats(s3_bam).equals(sortase.idxstats(large_bam))


def test_s3_read_bam_region_equals_local(s3_bam: str, large_bam: Path) -> None:
    got = sortase.read_bam(s3_bam, region=REGION, columns=["qname", "flag", "pos", "cigar"])
    want = sortase.read_bam(large_bam, region=REGION, columns=["qname", "flag", "pos", "cigar"])
    assert got.num_rows > 0
    assert got.equals(want)


def test_s3_missing_object_names_the_url(s3_bam: str) -> None:
    missing = f"s3://{BUCKET}/missing.bam"
    with pytest.raises(sortase.InputError, match=missing):
        sortase.flagstat(missing)
    with pytest.raises(sortase.InputError, match="no such object"):
        sortase.view(missing, count=True)
