package org.tidemq.spark;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.sparkproject.connect.grpc.CallOptions;
import org.sparkproject.connect.grpc.ManagedChannel;
import org.sparkproject.connect.grpc.MethodDescriptor;
import org.sparkproject.connect.grpc.StatusRuntimeException;
import org.sparkproject.connect.grpc.netty.NettyChannelBuilder;
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
 *            "max_offset", "count", "crc32"}
 *   4*count  record sizes, i32 LE
 *   ...      the records, back to back, in the commit-log layout (Records)
 * crc32: CRC-32 of the sizes then the records as sent (the broker checked every record's
 * own CRCs before sending); a frame that fails it is refused, never decoded.
 * </pre>
 * One channel per endpoint per JVM, shared by the tasks of an executor.
 */
final class PullClient {
    static final int OK = 20000, MESSAGE_NOT_FOUND = 40401, ILLEGAL_OFFSET = 40019;
    static final int COUNT_MAX = 65536;
    static final int BYTES_MAX = 16 << 20;
    private static final int MESSAGE_MAX_BYTES = 80 << 20;
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final ConcurrentHashMap<String, ManagedChannel> CHANNELS = new ConcurrentHashMap<>();
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
        long nextOffset, maxOffset;
        int count;
        boolean crcChecked;
        ByteBuffer data;        // big-endian view of the whole response
        int[] sizes;
        int recordsAt;
    }

    private final ManagedChannel channel;
    private final long timeoutMs;

    PullClient(String endpoint, long timeoutMs) {
        this.channel = CHANNELS.computeIfAbsent(endpoint, PullClient::open);
        this.timeoutMs = timeoutMs;
    }

    private static ManagedChannel open(String endpoint) {
        int colon = endpoint.lastIndexOf(':');
        if (colon < 0) {
            throw new IllegalArgumentException("tidemq: endpoint " + endpoint + " is not host:port");
        }
        return NettyChannelBuilder.forAddress(endpoint.substring(0, colon), Integer.parseInt(endpoint.substring(colon + 1)))
                .usePlaintext().maxInboundMessageSize(MESSAGE_MAX_BYTES).flowControlWindow(16 << 20).build();
    }

    ListenableFuture<byte[]> pull(String topic, int queue, long offset, int maxCount) {
        ObjectNode req = JSON.createObjectNode().put("topic", topic).put("queue_id", queue).put("offset", offset)
                .put("max_count", Math.max(1, Math.min(maxCount, COUNT_MAX))).put("max_bytes", BYTES_MAX).put("wait_ms", 0);
        byte[] raw = req.toString().getBytes(StandardCharsets.UTF_8);
        return ClientCalls.futureUnaryCall(channel.newCall(PULL,
                CallOptions.DEFAULT.withDeadlineAfter(timeoutMs, TimeUnit.MILLISECONDS)), raw);
    }

    /** The response of a pull, its frame CRC checked; an error code or a bad CRC raises. */
    static Frame frame(ListenableFuture<byte[]> pending, long offset) throws IOException {
        byte[] raw;
        try {
            raw = pending.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("tidemq: interrupted while pulling", e);
        } catch (ExecutionException e) {
            Throwable c = e.getCause();
            if (c instanceof StatusRuntimeException) {
                throw new IOException("tidemq: PullRecords from offset " + offset + " failed: " + c.getMessage(), c);
            }
            throw new IOException("tidemq: PullRecords from offset " + offset + " failed", c);
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
        f.count = head.path("count").asInt(0);
        if (f.code != OK && f.code != MESSAGE_NOT_FOUND && f.code != ILLEGAL_OFFSET) {
            throw new IOException("tidemq: the broker refused a pull from offset " + offset + ": code " + f.code
                    + ": " + f.message);
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
        for (int i = 0; i < f.count; i++) {
            f.sizes[i] = le.getInt(s0 + 4 * i);
        }
        f.recordsAt = (int) s1;
        f.data = ByteBuffer.wrap(raw);            // big-endian, as the records are
        return f;
    }
}
