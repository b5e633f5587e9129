/*
 * Licensed under the Apache License, Version 2.0. See http://www.apache.org/licenses/LICENSE-2.0
 */
package io.lakegate.connect.s3;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.AwsCredentialsProvider;
import software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.core.sync.RequestBody;
import software.amazon.awssdk.http.urlconnection.UrlConnectionHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.s3.S3Client;
import software.amazon.awssdk.services.s3.S3ClientBuilder;
import software.amazon.awssdk.services.s3.model.AbortMultipartUploadRequest;
import software.amazon.awssdk.services.s3.model.CompleteMultipartUploadRequest;
import software.amazon.awssdk.services.s3.model.CompletedMultipartUpload;
import software.amazon.awssdk.services.s3.model.CompletedPart;
import software.amazon.awssdk.services.s3.model.CreateMultipartUploadRequest;
import software.amazon.awssdk.services.s3.model.UploadPartRequest;
import software.amazon.awssdk.services.s3.model.UploadPartResponse;

/**
 * The task's S3 client (AWS SDK v2 with the JDK {@code HttpURLConnection} transport). Created in
 * {@link S3SinkTask#start}, used by {@link S3SinkTask#flush}, closed in {@link S3SinkTask#stop}.
 */
final class S3Storage implements AutoCloseable {

    private static final Logger log = LoggerFactory.getLogger(S3Storage.class);

    private final S3Client client;
    private final String bucket;

    S3Storage(S3Client client, String bucket) {
        this.client = client;
        this.bucket = bucket;
    }

    /** A client for the configured bucket, region, endpoint (path-style when set) and credentials. */
    static S3Storage create(S3SinkConfig config) {
        S3ClientBuilder builder = S3Client.builder()
                .httpClientBuilder(UrlConnectionHttpClient.builder())
                .region(Region.of(config.region()))
                .credentialsProvider(credentials(config));
        if (config.endpoint() != null) {
            builder.endpointOverride(config.endpoint()).forcePathStyle(true);
        }
        return new S3Storage(builder.build(), config.bucket());
    }

    private static AwsCredentialsProvider credentials(S3SinkConfig config) {
        if (config.accessKeyId() != null) {
            return StaticCredentialsProvider.create(
                    AwsBasicCredentials.create(config.accessKeyId(), config.secretAccessKey()));
        }
        return DefaultCredentialsProvider.create();
    }

    String bucket() {
        return bucket;
    }

    /**
     * Uploads {@code file} as {@code key} with one S3 multipart upload, as Aiven's sink does for every
     * object: CreateMultipartUpload, then UploadPart for each {@code partSize} bytes of the file (the
     * last part holds the rest), then CompleteMultipartUpload. On any failure the upload is aborted
     * (AbortMultipartUpload, best effort) and the failure is rethrown, so no object appears under
     * {@code key}. One part is held in memory at a time.
     *
     * @return the number of parts uploaded
     * @throws IOException if the file cannot be read
     * @throws software.amazon.awssdk.core.exception.SdkException if S3 rejects a request
     */
    int upload(String key, Path file, int partSize) throws IOException {
        long size = Files.size(file);
        String uploadId = client.createMultipartUpload(CreateMultipartUploadRequest.builder()
                .bucket(bucket)
                .key(key)
                .build()).uploadId();
        try {
            List<CompletedPart> parts = new ArrayList<>();
            byte[] buffer = new byte[(int) Math.min(partSize, Math.max(size, 1))];
            try (InputStream in = Files.newInputStream(file)) {
                long sent = 0;
                do {
                    int length = in.readNBytes(buffer, 0, (int) Math.min(buffer.length, size - sent));
                    int partNumber = parts.size() + 1;
                    UploadPartResponse response = client.uploadPart(UploadPartRequest.builder()
                            .bucket(bucket)
                            .key(key)
                            .uploadId(uploadId)
                            .partNumber(partNumber)
                            .contentLength((long) length)
                            .build(),
                            // A fresh stream over the same bytes on each call, so the SDK can retry.
                            RequestBody.fromContentProvider(() -> new ByteArrayInputStream(buffer, 0, length),
                                    length, "application/octet-stream"));
                    parts.add(CompletedPart.builder().partNumber(partNumber).eTag(response.eTag()).build());
                    sent += length;
                } while (sent < size);
            }
            client.completeMultipartUpload(CompleteMultipartUploadRequest.builder()
                    .bucket(bucket)
                    .key(key)
                    .uploadId(uploadId)
                    .multipartUpload(CompletedMultipartUpload.builder().parts(parts).build())
                    .build());
            return parts.size();
        } catch (IOException | RuntimeException e) {
            abort(key, uploadId, e);
            throw e;
        }
    }

    private void abort(String key, String uploadId, Exception cause) {
        try {
            client.abortMultipartUpload(AbortMultipartUploadRequest.builder()
                    .bucket(bucket)
                    .key(key)
                    .uploadId(uploadId)
                    .build());
            log.warn("Aborted multipart upload {} of s3://{}/{} after: {}", uploadId, bucket, key, cause.toString());
        } catch (RuntimeException abortFailure) {
            cause.addSuppressed(abortFailure);
        }
    }

    @Override
    public void close() {
        client.close();
    }
}
