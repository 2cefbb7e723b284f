"""`e31 outputs --download` follows a big output's redirect to the store's presigned URL (an S3 store), without
sending the API token there, and checks the sha256 of what the store gives."""

import hashlib

import httpx

JOB_ID = "5b0e6f3c-8d1a-4c55-9a8e-0d6f4c1e2a77"
PRESIGNED = "http://store.test/e31/jobs/x/output/big.bin?Signature=s&Expires=1"
CONTENT = b"big output\n" * 1000


def test_a_big_output_is_fetched_from_its_presigned_url_without_the_token(e31, tmp_path):
    seen: list[httpx.Request] = []

    def server(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.host == "store.test":
            return httpx.Response(200, content=CONTENT)
        if request.url.path.endswith("/outputs/"):
            sha256 = hashlib.sha256(CONTENT).hexdigest()
            return httpx.Response(200, json=[{"path": "big.bin", "size": len(CONTENT), "sha256": sha256}])
        return httpx.Response(302, headers={"Location": PRESIGNED})

    result = e31(server, "outputs", JOB_ID, "--download", str(tmp_path))

    assert result.exit_code == 0, result.output
    assert (tmp_path / "big.bin").read_bytes() == CONTENT
    store = [r for r in seen if r.url.host == "store.test"]
    assert len(store) == 1 and "Authorization" not in store[0].headers
