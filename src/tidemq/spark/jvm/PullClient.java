package org.tidemq.spark;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.sparkproject.connect.grpc.CallOptions;
import org.sparkproject.connect.grpc.MethodDescriptor;
import org.sparkproject.connect.grpc.Status;
import org.sparkproject.connect.grpc.StatusRuntimeException;
import org.sparkproject.connect.grpc.stub.ClientCalls;
import org.sparkproject.guava.util.concurrent.ListenableFuture;

/**
 * {@code /tidemq.Data/PullRecords} (tidemq/protocol/pull_frame.py) over the grpc-java that
 * Spark Connect's jar carries (shaded as org.sparkproject.connect.grpc), raw bytes both ways.
 *
 * <pre>
 * Request: UTF-8 JSON {"topic", "queue_id", "offset", "max_count", "max_bytes", "wait_ms"}.
 * Response:
 *   u32 LE   header length h
 *   h        header, UTF-8 JSON: {"code", "message", "status", "next_offset", "min_offset",
 *            "max_offset", "count", "crc32", "bytes_max"}
 *   4*count  record sizes, i32 LE
 *   ...      the records, back to back, in the commit-log layout (Records)
 * crc32: CRC-32 of the sizes then the records as sent (the broker checked every record's
 * own CRCs before sending); a frame that fails it is refused, never decoded. bytes_max: the broker's
 * own bound on an answer (its records and their sizes), which BrokerRangeReader sizes its pulls to.
 * </pre>
 * Channels: Connection's (TLS, signed calls), one per endpoint per JVM, shared by an executor's tasks.
 * A failure is typed: {@link Unreachable} (the member did not answer: another member may) or
 * {@link Refused} (the broker answered no: the keys, a permission, a bad request; the same
 * anywhere), each with one line saying what to change.
 */
final class PullClient {
    static final int OK = 20000, MESSAGE_NOT_FOUND = 40401, ILLEGAL_OFFSET = 40019;
    static final int UNAUTHORIZED = 40100, FORBIDDEN = 40300;
    static final int COUNT_MAX = 65536;
    static final int BYTES_MAX = 16 << 20;
    static final int WAIT_MS_MAX = 5000;
    private static final ObjectMapper JSON = new ObjectMapper();

    /** The member did not answer (down, unreachable, timed out, restarting): another member may. */
    static final class Unreachable extends IOException {
        private static final long serialVersionUID = 1L;

        Unreachable(String message, Throwable cause) {
            super(message, cause);
        }
    }

    /** The broker answered, refusing: the same at every member, so never retried elsewhere. */
    static final class Refused extends IOException {
        private static final long serialVersionUID = 1L;
        final int code;

        Refused(int code, String message) {
            super(message);
            this.code = code;
        }
    }
    private static final MethodDescriptor.Marshaller<byte[]> BYTES = new MethodDescriptor.Marshaller<>() {
        @Override
        public InputStream stream(byte[] value) {
            return new ByteArrayInputStream(value);
        }

        @Override
        public byte[] parse(InputStream stream) {
            try {
                int known = stream.available();          // grpc's message streams know their length
                byte[] got = new byte[known];
                int n = stream.readNBytes(got, 0, known);  // straight into one array (not readNBytes(int)'s chunks)
                if (n < known) {
                    got = java.util.Arrays.copyOf(got, n);
                }
                byte[] rest = stream.readAllBytes();          // none, unless a stream said less than it had
                if (rest.length == 0) {
                    return got;
                }
                byte[] all = java.util.Arrays.copyOf(got, got.length + rest.length);
                System.arraycopy(rest, 0, all, got.length, rest.length);
                return all;
            } catch (IOException e) {
                throw new IllegalStateException("tidemq: reading a PullRecords response", e);
            }
        }
    };
    static final MethodDescriptor<byte[], byte[]> PULL = MethodDescriptor.<byte[], byte[]>newBuilder()
            .setType(MethodDescriptor.MethodType.UNARY)
            .setFullMethodName("tidemq.Data/PullRecords")
            .setRequestMarshaller(BYTES).setResponseMarshaller(BYTES).build();

    /** One response: its header fields, and its records (absolute positions in {@code data}). */
    static final class Frame {
        int code;
        String message;
        long nextOffset, minOffset, maxOffset;
        int count;
        long bytesMax;          // the broker's bound on an answer's records and sizes (0: not said)
        boolean crcChecked;
        ByteBuffer data;        // big-endian view of the whole response
        int[] sizes;
        int recordsAt;
    }

    final String endpoint;
    private final Connection conn;
    private final long timeoutMs;

    PullClient(String endpoint, Connection conn, long timeoutMs) {
        this.endpoint = endpoint;
        this.conn = conn;
        this.timeoutMs = timeoutMs;
        conn.channel(endpoint);                 // a bad rootCertificates fails here, naming the option
    }

    /** A pull of up to {@code maxCount} records and {@code maxBytes} of them (the broker may stop sooner:
     * its own bound, a segment's end). */
    ListenableFuture<byte[]> pull(String topic, int queue, long offset, int maxCount, int maxBytes, int waitMs) {
        ObjectNode req = JSON.createObjectNode().put("topic", topic).put("queue_id", queue).put("offset", offset)
                .put("max_count", Math.max(1, Math.min(maxCount, COUNT_MAX)))
                .put("max_bytes", Math.max(1, Math.min(maxBytes, BYTES_MAX)))
                .put("wait_ms", Math.max(0, Math.min(waitMs, WAIT_MS_MAX)));
        byte[] raw = req.toString().getBytes(StandardCharsets.UTF_8);
        return ClientCalls.futureUnaryCall(conn.call(endpoint, PULL,
                CallOptions.DEFAULT.withDeadlineAfter(timeoutMs + waitMs, TimeUnit.MILLISECONDS)), raw);
    }

    /** Whether a failure's causes hold a TLS handshake or certificate failure. */
    private static Throwable tlsCause(Throwable t) {
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (c instanceof javax.net.ssl.SSLException || c instanceof java.security.cert.CertificateException) {
                return c;
            }
        }
        return null;
    }

    /** A failed call as one typed line: a certificate not trusted (option rootCertificates), a TLS
     * port reached in plaintext or the other way round (option tls), or the member unreachable. */
    IOException failure(Throwable c, String topic, int queue, long offset) {
        Throwable ssl = tlsCause(c);
        if (ssl != null) {
            String why = String.valueOf(ssl.getMessage());
            boolean cert = false;
            for (Throwable t = ssl; t != null; t = t.getCause()) {
                String m = String.valueOf(t.getMessage()).toLowerCase(java.util.Locale.ROOT);
                if (t instanceof java.security.cert.CertificateException
                        || t instanceof java.security.cert.CertPathValidatorException
                        || m.contains("pkix") || m.contains("certif") || m.contains("verif")) {
                    cert = true;
                    why = String.valueOf(t.getMessage());
                }
            }
            if (cert) {
                return new Refused(0, "tidemq: the certificate of the broker at " + endpoint + " could not be verified ("
                        + why + "): give the option rootCertificates, the PEM file of the CA that signed it (readable "
                        + "at the same path where the tasks run)" + (conn.rootCertificates == null ? ""
                        : ", not " + conn.rootCertificates));
            }
            return new Refused(0, "tidemq: TLS with the broker at " + endpoint + " failed (" + why + "): does it speak "
                    + "TLS? Set the option tls (and rootCertificates) to match the broker");
        }
        if (c instanceof StatusRuntimeException) {
            Status.Code code = ((StatusRuntimeException) c).getStatus().getCode();
            String d = String.valueOf(((StatusRuntimeException) c).getStatus().getDescription());
            if (code == Status.Code.UNAVAILABLE && !conn.tls && (d.contains("HTTP/2") || d.contains("http2")
                    || d.contains("first received frame") || d.contains("SETTINGS"))) {
                return new Refused(0, "tidemq: the broker at " + endpoint + " speaks TLS: set the option tls=true "
                        + "(and rootCertificates, the CA's PEM file)");
            }
            if (code == Status.Code.UNAUTHENTICATED) {
                return new Refused(UNAUTHORIZED, "tidemq: the broker at " + endpoint + " refused the keys ("
                        + d + "): check the options accessKey and secretKey");
            }
            if (code == Status.Code.PERMISSION_DENIED) {
                return new Refused(FORBIDDEN, "tidemq: FORBIDDEN reading " + topic + " queue " + queue + " (" + d
                        + "): the user needs the permission sub on topic " + topic);
            }
            if (code == Status.Code.UNIMPLEMENTED || code == Status.Code.INVALID_ARGUMENT) {
                return new Refused(0, "tidemq: the broker at " + endpoint + " cannot serve PullRecords from offset "
                        + offset + " (" + code + ": " + d + ")");
            }
        }
        return new Unreachable("tidemq: PullRecords of " + topic + " queue " + queue + " from offset " + offset
                + " at " + endpoint + " failed: " + c.getMessage(), c);
    }

    /** A refusal in a frame's code as one line naming what to change. */
    Refused refusal(int code, String message, String topic, int queue, long offset) {
        if (code == UNAUTHORIZED) {
            return new Refused(code, "tidemq: UNAUTHORIZED: the broker at " + endpoint + " refused the keys (" + message
                    + "): check the options accessKey and secretKey");
        }
        if (code == FORBIDDEN) {
            return new Refused(code, "tidemq: FORBIDDEN: reading " + topic + " needs the permission sub on topic "
                    + topic + " (" + message + "): grant it (tidemq acl grant USER --topic " + topic
                    + " --actions sub) or use the keys (options accessKey, secretKey) of a user who has it");
        }
        return new Refused(code, "tidemq: the broker at " + endpoint + " refused a pull of " + topic + " queue " + queue
                + " from offset " + offset + ": code " + code + ": " + message);
    }

    /** The response of a pull, its frame CRC checked; an error code or a bad CRC raises. */
    Frame frame(ListenableFuture<byte[]> pending, String topic, int queue, long offset) throws IOException {
        byte[] raw;
        try {
            raw = pending.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("tidemq: interrupted while pulling", e);
        } catch (ExecutionException e) {
            throw failure(e.getCause(), topic, queue, offset);
        } catch (java.util.concurrent.CancellationException e) {
            throw new Unreachable("tidemq: a pull of " + topic + " queue " + queue + " was cancelled", e);
        }
        ByteBuffer le = ByteBuffer.wrap(raw).order(ByteOrder.LITTLE_ENDIAN);
        if (raw.length < 4) {
            throw new IOException("tidemq: a PullRecords response of " + raw.length + " bytes");
        }
        int hl = le.getInt(0);
        if (hl < 0 || 4L + hl > raw.length) {
            throw new IOException("tidemq: a PullRecords response whose header does not fit");
        }
        JsonNode head = JSON.readTree(new ByteArrayInputStream(raw, 4, hl));
        Frame f = new Frame();
        f.code = head.path("code").asInt(50001);
        f.message = head.path("message").asText("");
        f.nextOffset = head.path("next_offset").asLong(offset);
        f.maxOffset = head.path("max_offset").asLong(0);
        f.minOffset = head.path("min_offset").asLong(-1);
        f.count = head.path("count").asInt(0);
        f.bytesMax = Math.max(0, head.path("bytes_max").asLong(0));
        if (f.code >= 50000) {                  // the member cannot serve now (starting, failing over)
            throw new Unreachable("tidemq: the broker at " + endpoint + " could not serve a pull of " + topic
                    + " queue " + queue + " from offset " + offset + ": code " + f.code + ": " + f.message, null);
        }
        if (f.code != OK && f.code != MESSAGE_NOT_FOUND && f.code != ILLEGAL_OFFSET) {
            throw refusal(f.code, f.message, topic, queue, offset);
        }
        int s0 = 4 + hl;
        long s1 = s0 + 4L * f.count;
        if (f.count < 0 || s1 > raw.length) {
            throw new IOException("tidemq: a PullRecords response whose sizes do not fit");
        }
        JsonNode sent = head.get("crc32");
        if (sent != null && !sent.isNull()) {
            CRC32 crc = new CRC32();
            crc.update(raw, s0, raw.length - s0);
            if (crc.getValue() != sent.asLong()) {
                throw new IOException("tidemq: MESSAGE_CORRUPTED: a PullRecords response from offset " + offset
                        + " fails its frame CRC: damaged on the way (pull again)");
            }
            f.crcChecked = true;
        }
        f.sizes = new int[f.count];
        // one bulk get, no loop here: a loop made this method (Jackson's parser inlined) hot for C2 on its own
        ByteBuffer.wrap(raw, s0, 4 * f.count).order(ByteOrder.LITTLE_ENDIAN).asIntBuffer().get(f.sizes);
        f.recordsAt = (int) s1;
        f.data = ByteBuffer.wrap(raw);            // big-endian, as the records are
        return f;
    }
}
