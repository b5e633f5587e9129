/*
 * Licensed under the Apache License, Version 2.0. See http://www.apache.org/licenses/LICENSE-2.0
 */
package io.lakegate.connect.s3;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Objects;
import java.util.Map;

import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.errors.DataException;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Buffers records per topic partition and writes one S3 object per partition at each offset commit,
 * as Aiven's S3 sink does; with {@code format.class} (Confluent's layout) one object per encoded
 * partition, cut where the value schema changes and every {@code flush.size} records.
 *
 * <p>Who calls what (all on the task's own thread, by the Connect runtime's {@code WorkerSinkTask}):
 * <ul>
 *   <li>{@link #start} once, then {@link #open} with the partitions assigned by the consumer group;</li>
 *   <li>{@link #put} with each batch polled from Kafka: records are only buffered, in order;</li>
 *   <li>{@code preCommit} every {@code offset.flush.interval.ms} and before partitions are revoked:
 *       the inherited implementation calls {@link #flush} and returns the offsets it was given, which
 *       the runtime then commits to the consumer group. Since {@link #flush} returns only once every
 *       buffered record is in S3, the committed offset never passes a record that is not durable;</li>
 *   <li>{@link #close} with revoked partitions, {@link #stop} at shutdown.</li>
 * </ul>
 */
public class S3SinkTask extends SinkTask {

    private static final Logger log = LoggerFactory.getLogger(S3SinkTask.class);

    /** In {@code lakegate.test.fault.dir}: whoever deletes it first runs the simulated crash once. */
    static final String CRASH_AFTER_UPLOAD_FILE = "crash-after-upload";
    /** In {@code lakegate.test.fault.dir}: one line per split partition of a simulated crash. */
    static final String CLAIMED_LOG_FILE = "claimed.log";

    /** Records received by {@link #put} and not yet written, per (pre-SMT) topic partition. */
    private final Map<TopicPartition, List<SinkRecord>> buffers = new HashMap<>();

    private S3SinkConfig config;
    private S3Storage storage;
    private RecordFileWriter writer;

    @Override
    public String version() {
        return S3SinkConnector.VERSION;
    }

    @Override
    public void start(Map<String, String> props) {
        config = new S3SinkConfig(props);
        storage = S3Storage.create(config);
        writer = config.newWriter();
        log.info("S3 sink task started: bucket={} prefix={} template={} format={} fields={} envelope={} "
                        + "compression={} partSize={}", config.bucket(), config.prefix() == null ? "(unset)"
                        : "'" + config.prefix() + "'", config.template() == null ? "(default)" : config.template(),
                config.format(), config.fields(), config.envelope(),
                config.format() == S3SinkConfig.Format.PARQUET ? config.parquetCodec() : config.compression(),
                config.partSize());
    }

    @Override
    public void open(Collection<TopicPartition> partitions) {
        log.debug("Assigned {}", partitions);
    }

    @Override
    public void put(Collection<SinkRecord> records) {
        for (SinkRecord record : records) {
            if (config.confluent() != null && record.value() == null) {
                if (config.ignoreNullValues()) {
                    continue;  // Confluent's behavior.on.null.values=ignore
                }
                throw new DataException("Null valued records are not writeable with current "
                        + S3SinkConfig.BEHAVIOR_ON_NULL_VALUES + " 'fail' setting (" + record.topic() + "-"
                        + record.kafkaPartition() + "@" + record.kafkaOffset() + ")");
            }
            TopicPartition tp = new TopicPartition(record.originalTopic(), record.originalKafkaPartition());
            buffers.computeIfAbsent(tp, k -> new ArrayList<>()).add(record);
        }
    }

    /**
     * Writes one object per buffered partition (named by its first record's offset), uploads it (one
     * multipart upload, aborted on failure), and clears that buffer. Returns only when all uploads succeeded.
     *
     * <p>On a failure this throws {@link ConnectException} rather than a {@code RetriableException}
     * or skipping the partition: nothing may be committed past records that are not in S3. The
     * runtime's reaction to an exception from {@code preCommit} is to log it at ERROR ("Offset commit
     * failed, rewinding to last committed offsets"), not commit, and seek the partitions of
     * {@code currentOffsets} back to their last committed offsets; it then re-delivers those records
     * to {@link #put}. So the buffers of those partitions are dropped here, or the records would be
     * written twice. Objects already uploaded in this round are rewritten under the same key (same
     * start offset) once their records come back. The task keeps RUNNING and retries at each commit.
     *
     * <p>TEST-ONLY: with {@code lakegate.test.fault.dir} set, a flush that claims the fault file runs
     * {@link #crashAfterUpload} instead (split uploads, then the same failure path).
     */
    @Override
    public void flush(Map<TopicPartition, OffsetAndMetadata> currentOffsets) {
        List<TopicPartition> pending = new ArrayList<>();
        buffers.forEach((tp, records) -> {
            if (!records.isEmpty()) {
                pending.add(tp);
            }
        });
        pending.sort(Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition));
        if (claimCrashAfterUpload(pending)) {
            crashAfterUpload(pending, currentOffsets);
        }
        for (TopicPartition tp : pending) {
            try {
                writeFiles(buffers.get(tp));
                buffers.remove(tp);
            } catch (IOException | RuntimeException e) {
                currentOffsets.keySet().forEach(buffers::remove);
                throw new ConnectException("Failed to write records of " + tp + " to s3://" + config.bucket()
                        + "; offsets are not committed and will be re-consumed", e);
            }
        }
    }

    /**
     * TEST-ONLY ({@code lakegate.test.fault.dir} set): claims the simulated crash by deleting
     * {@code <dir>/crash-after-upload}. {@link Files#deleteIfExists} succeeds for one caller only, so
     * one task of any worker on the machine wins. Only tried when some buffered partition holds at
     * least 2 records (else there is nothing to split and the fault would be spent for nothing).
     */
    private boolean claimCrashAfterUpload(List<TopicPartition> pending) {
        Path dir = config.testFaultDir();
        if (dir == null || pending.stream().noneMatch(tp -> buffers.get(tp).size() >= 2)) {
            return false;
        }
        try {
            return Files.deleteIfExists(dir.resolve(CRASH_AFTER_UPLOAD_FILE));
        } catch (IOException e) {
            log.warn("{}: cannot claim {}/{}: {}", S3SinkConfig.LAKEGATE_TEST_FAULT_DIR, dir,
                    CRASH_AFTER_UPLOAD_FILE, e.toString());
            return false;
        }
    }

    /**
     * TEST-ONLY: a task that "crashes after uploading its files but before Connect committed the
     * offsets", with the file boundaries of a sink that rotates by record count (Aiven's
     * {@code file.max.records}). Each buffered partition of 2+ records is written as two objects split
     * at its middle record, each named by its own first offset; a 1-record partition as one object.
     * Each split is logged to {@code <dir>/claimed.log} as {@code <topic>-<partition> <first> <split>
     * <last>}. Then the flush fails like an upload failure: buffers dropped, {@link ConnectException}
     * thrown, so Connect commits nothing, rewinds and re-delivers; the normal path then writes one
     * object from the committed offset, overwriting the first half, and the second half stays behind
     * as an orphan whose offsets overlap the new object.
     */
    private void crashAfterUpload(List<TopicPartition> pending, Map<TopicPartition, OffsetAndMetadata> currentOffsets) {
        Path claimedLog = config.testFaultDir().resolve(CLAIMED_LOG_FILE);
        log.warn("{}: claimed {}; simulating a crash after upload for {}", S3SinkConfig.LAKEGATE_TEST_FAULT_DIR,
                config.testFaultDir().resolve(CRASH_AFTER_UPLOAD_FILE), pending);
        List<String> splits = new ArrayList<>();
        for (TopicPartition tp : pending) {
            List<SinkRecord> records = buffers.get(tp);
            try {
                if (records.size() < 2) {
                    writeFiles(records);
                    continue;
                }
                int middle = records.size() / 2;
                writeFiles(records.subList(0, middle));
                writeFiles(records.subList(middle, records.size()));
                String line = tp + " " + records.get(0).kafkaOffset() + " " + records.get(middle).kafkaOffset() + " "
                        + records.get(records.size() - 1).kafkaOffset();
                Files.writeString(claimedLog, line + "\n", StandardOpenOption.CREATE, StandardOpenOption.APPEND,
                        StandardOpenOption.WRITE);
                splits.add(line);
                log.warn("{}: split {} into two objects (first split last: {})", S3SinkConfig.LAKEGATE_TEST_FAULT_DIR,
                        tp, line);
            } catch (IOException | RuntimeException e) {
                currentOffsets.keySet().forEach(buffers::remove);
                throw new ConnectException("Failed to write records of " + tp + " to s3://" + config.bucket()
                        + "; offsets are not committed and will be re-consumed", e);
            }
        }
        currentOffsets.keySet().forEach(buffers::remove);
        throw new ConnectException(S3SinkConfig.LAKEGATE_TEST_FAULT_DIR + ": simulated crash after upload of "
                + pending + " (split: " + splits + "); offsets are not committed and will be re-consumed");
    }

    /**
     * Writes one partition's buffered records: one object (Aiven's), or with Confluent's layout one
     * object per encoded partition (each named by its own first offset, so one Kafka partition's
     * objects interleave where its records' directories alternate), all of them closed where the value
     * schema changes or {@code flush.size} records were written, as Confluent's sink rotates.
     */
    private void writeFiles(List<SinkRecord> records) throws IOException {
        ConfluentLayout layout = config.confluent();
        if (layout == null) {
            writeObject(records, null);
            return;
        }
        long now = System.currentTimeMillis();
        Map<String, List<SinkRecord>> open = new LinkedHashMap<>();
        Schema schema = records.get(0).valueSchema();
        int written = 0;
        for (SinkRecord record : records) {
            if (!Objects.equals(record.valueSchema(), schema)) {
                closeAll(open);
                schema = record.valueSchema();
                written = 0;
            }
            open.computeIfAbsent(layout.encodedPartition(record, now), k -> new ArrayList<>()).add(record);
            if (++written == config.flushSize()) {
                closeAll(open);
                written = 0;
            }
        }
        closeAll(open);
    }

    private void closeAll(Map<String, List<SinkRecord>> open) throws IOException {
        for (Map.Entry<String, List<SinkRecord>> file : open.entrySet()) {
            writeObject(file.getValue(), file.getKey());
        }
        open.clear();
    }

    /**
     * Writes {@code records} to a temp file, uploads it by multipart upload, deletes the file and logs
     * one INFO line. {@code encoded}: Confluent's encoded partition (its directories), else null.
     */
    private void writeObject(List<SinkRecord> records, String encoded) throws IOException {
        SinkRecord first = records.get(0);
        SinkRecord last = records.get(records.size() - 1);
        String key = config.objectKey(first.topic(), first.kafkaPartition(), first.kafkaOffset(), encoded);
        Path file = Files.createTempFile("lakegate-s3-sink-", config.format() == S3SinkConfig.Format.PARQUET
                ? ".parquet" : ".jsonl");
        try {
            writer.write(records, file);
            long bytes = Files.size(file);
            int parts = storage.upload(key, file, config.partSize());
            log.info("Wrote s3://{}/{}: {} records, offsets {}..{}, {} bytes in {} part(s)", storage.bucket(), key,
                    records.size(), first.kafkaOffset(), last.kafkaOffset(), bytes, parts);
        } finally {
            Files.deleteIfExists(file);
        }
    }

    /**
     * Called on rebalance with the revoked partitions (after a final preCommit) and at shutdown:
     * drops their unwritten records; the new owner re-consumes them from the committed offset.
     */
    @Override
    public void close(Collection<TopicPartition> partitions) {
        for (TopicPartition tp : partitions) {
            List<SinkRecord> dropped = buffers.remove(tp);
            if (dropped != null && !dropped.isEmpty()) {
                log.info("Dropped {} unwritten records of revoked partition {} (offsets {}..{})", dropped.size(), tp,
                        dropped.get(0).kafkaOffset(), dropped.get(dropped.size() - 1).kafkaOffset());
            }
        }
    }

    @Override
    public void stop() {
        buffers.clear();
        if (storage != null) {
            storage.close();
            storage = null;
        }
    }
}
