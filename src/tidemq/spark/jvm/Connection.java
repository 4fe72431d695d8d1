package org.tidemq.spark;

import java.io.File;
import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import javax.net.ssl.SSLException;

import com.fasterxml.jackson.databind.JsonNode;
import io.netty.handler.ssl.SslContextBuilder;
import org.sparkproject.connect.grpc.CallOptions;
import org.sparkproject.connect.grpc.Channel;
import org.sparkproject.connect.grpc.ClientCall;
import org.sparkproject.connect.grpc.ForwardingClientCall;
import org.sparkproject.connect.grpc.ManagedChannel;
import org.sparkproject.connect.grpc.Metadata;
import org.sparkproject.connect.grpc.MethodDescriptor;
import org.sparkproject.connect.grpc.netty.GrpcSslContexts;
import org.sparkproject.connect.grpc.netty.NettyChannelBuilder;

/**
 * How the JVM reader reaches a broker: plaintext or TLS (a CA file, the option
 * {@code rootCertificates}, or the JVM's system roots with {@code tls=true}), and every call
 * signed when keys are given ({@code accessKey}, {@code secretKey}): the RocketMQ 5 clients'
 * MQv2-HMAC-SHA1 headers, as tidemq.client sends them (tidemq/protocol/signing.py):
 *
 * <pre>
 * x-mq-date-time: 20250101T120000Z
 * authorization:  MQv2-HMAC-SHA1 Credential=AK, SignedHeaders=x-mq-date-time, Signature=hex(HMAC-SHA1(SK, date-time))
 * </pre>
 * One channel per (endpoint, TLS settings) per JVM, shared by the tasks of an executor.
 */
final class Connection implements Serializable {
    private static final long serialVersionUID = 1L;
    static final String ALGORITHM = "MQv2-HMAC-SHA1";
    static final int MESSAGE_MAX_BYTES = 80 << 20;
    private static final DateTimeFormatter DATE = DateTimeFormatter.ofPattern("yyyyMMdd'T'HHmmss'Z'")
            .withZone(ZoneOffset.UTC);
    private static final Metadata.Key<String> DATE_HEADER = Metadata.Key.of("x-mq-date-time",
            Metadata.ASCII_STRING_MARSHALLER);
    private static final Metadata.Key<String> AUTH_HEADER = Metadata.Key.of("authorization",
            Metadata.ASCII_STRING_MARSHALLER);
    private static final ConcurrentHashMap<String, ManagedChannel> CHANNELS = new ConcurrentHashMap<>();

    final String accessKey;
    final String secretKey;
    final boolean tls;
    final String rootCertificates;      // a PEM file's path, readable where the tasks run; null: system roots

    Connection(String accessKey, String secretKey, boolean tls, String rootCertificates) {
        this.accessKey = empty(accessKey) ? null : accessKey;
        this.secretKey = empty(secretKey) ? null : secretKey;
        if ((this.accessKey == null) != (this.secretKey == null)) {
            throw new IllegalArgumentException("tidemq: give both options accessKey and secretKey, or neither");
        }
        this.rootCertificates = empty(rootCertificates) ? null : rootCertificates;
        this.tls = tls || this.rootCertificates != null;
    }

    /** From a partition's source (the planner's JSON: tidemq/spark/planner.py). */
    static Connection of(JsonNode source) {
        return new Connection(text(source, "accessKey"), text(source, "secretKey"),
                source.path("tls").asBoolean(false), text(source, "rootCertificates"));
    }

    private static String text(JsonNode n, String k) {
        JsonNode v = n.get(k);
        return v == null || v.isNull() ? null : v.asText();
    }

    private static boolean empty(String s) {
        return s == null || s.isEmpty();
    }

    boolean signed() {
        return accessKey != null;
    }

    /** The date-time header's value for a moment. */
    static String dateTime(Instant now) {
        return DATE.format(now);
    }

    /** hex(HMAC-SHA1(secret, dateTime)), lower case, as tidemq.protocol.signing.sign. */
    static String sign(String secret, String dateTime) {
        try {
            Mac mac = Mac.getInstance("HmacSHA1");
            mac.init(new SecretKeySpec(secret.getBytes(StandardCharsets.UTF_8), "HmacSHA1"));
            byte[] d = mac.doFinal(dateTime.getBytes(StandardCharsets.UTF_8));
            StringBuilder sb = new StringBuilder(d.length * 2);
            for (byte b : d) {
                sb.append(Character.forDigit((b >> 4) & 0xf, 16)).append(Character.forDigit(b & 0xf, 16));
            }
            return sb.toString();
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("tidemq: HmacSHA1 is not available in this JVM", e);
        }
    }

    /** The authorization header's value (public for tests: the same as signing.signed_metadata's). */
    static String authorization(String accessKey, String secretKey, String dateTime) {
        return ALGORITHM + " Credential=" + accessKey + ", SignedHeaders=x-mq-date-time, Signature="
                + sign(secretKey, dateTime);
    }

    /** The shared channel to {@code endpoint} with these TLS settings. */
    ManagedChannel channel(String endpoint) {
        String key = endpoint + "\u0000" + tls + "\u0000" + Objects.toString(rootCertificates, "");
        return CHANNELS.computeIfAbsent(key, k -> open(endpoint));
    }

    private ManagedChannel open(String endpoint) {
        int colon = endpoint.lastIndexOf(':');
        if (colon < 0) {
            throw new IllegalArgumentException("tidemq: endpoint " + endpoint + " is not host:port");
        }
        String host = endpoint.substring(0, colon);
        if (host.startsWith("[") && host.endsWith("]")) {
            host = host.substring(1, host.length() - 1);
        }
        NettyChannelBuilder b = NettyChannelBuilder.forAddress(host, Integer.parseInt(endpoint.substring(colon + 1)))
                .maxInboundMessageSize(MESSAGE_MAX_BYTES).flowControlWindow(16 << 20);
        if (!tls) {
            return b.usePlaintext().build();
        }
        SslContextBuilder ssl = GrpcSslContexts.forClient();
        if (rootCertificates != null) {
            File ca = new File(rootCertificates);
            if (!ca.canRead()) {
                throw new IllegalArgumentException("tidemq: option rootCertificates: cannot read " + rootCertificates
                        + " where this task runs (a PEM file of the CA that signed the broker's certificate, at the "
                        + "same path on the driver and every executor)");
            }
            ssl.trustManager(ca);
        }
        try {
            return b.useTransportSecurity().sslContext(ssl.build()).build();
        } catch (SSLException | IllegalArgumentException e) {
            throw new IllegalArgumentException("tidemq: option rootCertificates: " + rootCertificates
                    + " is not a PEM file of certificates (" + e.getMessage() + ")", e);
        }
    }

    /** A call on the channel to {@code endpoint}, signed when there are keys. */
    <Q, R> ClientCall<Q, R> call(String endpoint, MethodDescriptor<Q, R> method, CallOptions options) {
        Channel ch = channel(endpoint);
        ClientCall<Q, R> call = ch.newCall(method, options);
        if (!signed()) {
            return call;
        }
        return new ForwardingClientCall.SimpleForwardingClientCall<Q, R>(call) {
            @Override
            public void start(Listener<R> listener, Metadata headers) {
                String now = dateTime(Instant.now());
                headers.put(DATE_HEADER, now);
                headers.put(AUTH_HEADER, authorization(accessKey, secretKey, now));
                super.start(listener, headers);
            }
        };
    }
}
