"""Local servers for the remote-input tests: an S3 endpoint (moto) or an HTTP server with Range.

    python tests/remote_server.py s3 BUCKET FILE...   # uploads FILEs as BUCKET/<name>
    python tests/remote_server.py http DIR            # serves DIR, honouring Range

Prints one line, the endpoint URL (`http://127.0.0.1:PORT`; for S3 followed by an access key id
and secret that may read the bucket), then serves until its standard input closes. The S3 endpoint
checks signatures and permissions once the files are uploaded (moto's IAM): other credentials are
refused. The HTTP server also counts the body bytes it sent and prints `served N` on standard error
when it stops.
"""

import http.server
import json
import os
import re
import sys
import threading
import urllib.request


class RangeHandler(http.server.SimpleHTTPRequestHandler):
    """SimpleHTTPRequestHandler plus single `Range: bytes=a-b` requests (206 with Content-Range)."""

    served = 0
    lock = threading.Lock()

    def log_message(self, *args):
        pass

    def send_head(self):
        path = self.translate_path(self.path)
        if os.path.isdir(path) or not os.path.isfile(path):
            self.send_error(404, "File not found")
            return None
        f = open(path, "rb")
        size = os.fstat(f.fileno()).st_size
        m = re.fullmatch(r"bytes=(\d*)-(\d*)", self.headers.get("Range", ""))
        if m is None:
            self.send_response(200)
            start, end = 0, size
        else:
            a, b = m.groups()
            if a == "":
                start, end = max(0, size - int(b)), size
            else:
                start, end = int(a), min(size, int(b) + 1 if b else size)
            if start >= size or start >= end:
                f.close()
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.end_headers()
                return None
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(end - start))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Last-Modified", self.date_time_string(int(os.fstat(f.fileno()).st_mtime)))
        self.end_headers()
        f.seek(start)
        self._left = end - start
        return f

    def copyfile(self, source, outputfile):
        left = self._left
        while left > 0:
            chunk = source.read(min(left, 1 << 16))
            if not chunk:
                break
            outputfile.write(chunk)
            left -= len(chunk)
            with RangeHandler.lock:
                RangeHandler.served += len(chunk)


def main():
    mode = sys.argv[1]
    if mode == "s3":
        import boto3
        from moto.server import ThreadedMotoServer

        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        url = f"http://{host}:{port}"
        s3 = boto3.client("s3", endpoint_url=url, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
        bucket = sys.argv[2]
        s3.create_bucket(Bucket=bucket)
        for path in sys.argv[3:]:
            with open(path, "rb") as f:
                s3.put_object(Bucket=bucket, Key=os.path.basename(path), Body=f.read())
        iam = boto3.client("iam", endpoint_url=url, region_name="us-east-1",
                           aws_access_key_id="testing", aws_secret_access_key="testing")
        iam.create_user(UserName="reader")
        iam.put_user_policy(UserName="reader", PolicyName="read", PolicyDocument=json.dumps({
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
        }))
        key = iam.create_access_key(UserName="reader")["AccessKey"]
        # From now on every request must be signed by a known key with the permission.
        urllib.request.urlopen(urllib.request.Request(
            f"{url}/moto-api/reset-auth", data=b"0", method="POST",
            headers={"Content-Type": "text/plain"})).read()
        print(url, key["AccessKeyId"], key["SecretAccessKey"], flush=True)
        sys.stdin.read()
        server.stop()
    elif mode == "http":
        os.chdir(sys.argv[2])
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RangeHandler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        print(f"http://127.0.0.1:{server.server_address[1]}", flush=True)
        sys.stdin.read()
        server.shutdown()
        print(f"served {RangeHandler.served}", file=sys.stderr, flush=True)
    else:
        sys.exit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
