import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageBatch;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.protocol.ResponseCode;

/**
 * RocketMQ's own Java producer at full speed, the ceiling of any sink on RocketMQ (bench.rocketmq_ceiling).
 *
 * <pre>
 * java -cp ROCKETMQ_JARS/*:CLASSES RocketMQProducerBench NAMESRV TOPIC ROWS SIZE MODE THREADS BATCH WARMUP_TOPIC
 * </pre>
 *
 * <p>Rows as bench.peers' sink_frame makes them: row i has key "user-(i % 100000)" and a value of SIZE
 * bytes, the hex SHA-256 of the decimal i repeated. MODE:
 * <ul>
 *   <li>plain: DefaultMQProducer, each row to logic queue murmur3_x86_32(utf8(key), 0) mod queues (staticmq's
 *   rule), BATCH rows per send(Collection, MessageQueue), THREADS threads sharing one producer; a batch the
 *   broker's flow control refuses (SYSTEM_BUSY) is sent again (counted: busy_retries), no other retry;</li>
 *   <li>transactional: TransactionMQProducer, one sendMessageInTransaction per row (its listener commits;
 *   RocketMQ has no transactional batch), THREADS threads; the producer picks the queue (round-robin);</li>
 *   <li>probe-batch: tries BATCH rows as one transactional MessageBatch and prints what RocketMQ answers.</li>
 * </ul>
 * Rows are built first, then ROWS/10 (at most 20,000) rows go to WARMUP_TOPIC ("-": none) for the JIT; it
 * prints READY and waits for a line on stdin (the caller samples the broker's CPU), then sends and waits
 * until the topic's max offsets sum to ROWS (a transaction's END_TRANSACTION is one-way: its commit lands
 * after sendMessageInTransaction returns). That part alone is timed; it prints one JSON line: rows,
 * seconds (until every row is visible), send_seconds, client_cpu_s (this JVM's CPU in the timed part).
 */
public final class RocketMQProducerBench {
    private static final int KEYS = 100_000;
    private static final AtomicInteger BUSY = new AtomicInteger(); // batches refused by flow control, sent again

    public static void main(String[] args) throws Exception {
        String namesrv = args[0], topic = args[1];
        int rows = Integer.parseInt(args[2]), size = Integer.parseInt(args[3]);
        String mode = args[4];
        int threads = Integer.parseInt(args[5]), batch = Integer.parseInt(args[6]);
        String warmupTopic = args[7];
        String group = "bench-" + mode + "-" + ProcessHandle.current().pid();
        DefaultMQProducer producer = mode.equals("plain") ? new DefaultMQProducer(group) : transactional(group);
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName(group);
        producer.setSendMsgTimeout(30_000);
        producer.setRetryTimesWhenSendFailed(0); // a retried send could write a row twice; fail instead
        producer.start();
        try {
            if (mode.equals("probe-batch")) {
                probeBatch((TransactionMQProducer) producer, topic, batch, size);
                return;
            }
            List<Message> warm = warmupTopic.equals("-") ? List.of() : messages(warmupTopic, Math.min(rows / 10, 20_000), size);
            List<Message> msgs = messages(topic, rows, size);
            if (!warm.isEmpty()) { // the warm-up's commits land before the timed part starts
                List<MessageQueue> warmQueues = producer.fetchPublishMessageQueues(warmupTopic);
                long before = maxOffsets(producer, warmQueues);
                send(producer, mode, warm, threads, batch);
                waitVisible(producer, warmQueues, before + warm.size());
                BUSY.set(0);
            }
            List<MessageQueue> queues = producer.fetchPublishMessageQueues(topic);
            System.out.println("READY");
            System.out.flush();
            new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();

            long cpu0 = processCpuNanos();
            long t0 = System.nanoTime();
            send(producer, mode, msgs, threads, batch);
            long sent = System.nanoTime();
            long visible = waitVisible(producer, queues, rows);
            long t1 = System.nanoTime();
            double cpu = (processCpuNanos() - cpu0) / 1e9;
            System.out.printf(Locale.ROOT,
                "{\"rows\": %d, \"seconds\": %.4f, \"send_seconds\": %.4f, \"client_cpu_s\": %.3f, \"visible\": %d,"
                    + " \"mode\": \"%s\", \"threads\": %d, \"batch\": %d, \"queues\": %d, \"busy_retries\": %d}%n",
                rows, (t1 - t0) / 1e9, (sent - t0) / 1e9, cpu, visible, mode, threads,
                mode.equals("plain") ? batch : 1, queues.size(), BUSY.get());
            System.out.flush();
        } finally {
            producer.shutdown();
        }
        System.exit(0);
    }

    private static TransactionMQProducer transactional(String group) {
        TransactionMQProducer producer = new TransactionMQProducer(group);
        producer.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return LocalTransactionState.COMMIT_MESSAGE;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                return LocalTransactionState.COMMIT_MESSAGE;
            }
        });
        return producer;
    }

    static List<Message> messages(String topic, int rows, int size) throws Exception {
        MessageDigest sha = MessageDigest.getInstance("SHA-256");
        List<Message> out = new ArrayList<>(rows);
        for (int i = 0; i < rows; i++) {
            byte[] hex = hex(sha.digest(Integer.toString(i).getBytes(StandardCharsets.UTF_8)));
            byte[] body = new byte[size];
            for (int at = 0; at < size; at += hex.length) {
                System.arraycopy(hex, 0, body, at, Math.min(hex.length, size - at));
            }
            Message msg = new Message(topic, body);
            msg.setKeys("user-" + (i % KEYS));
            out.add(msg);
        }
        return out;
    }

    private static byte[] hex(byte[] digest) {
        byte[] out = new byte[digest.length * 2];
        byte[] digits = "0123456789abcdef".getBytes(StandardCharsets.US_ASCII);
        for (int i = 0; i < digest.length; i++) {
            out[2 * i] = digits[(digest[i] >> 4) & 0xF];
            out[2 * i + 1] = digits[digest[i] & 0xF];
        }
        return out;
    }

    static void send(DefaultMQProducer producer, String mode, List<Message> msgs, int threads, int batch)
        throws Exception {
        AtomicReference<Throwable> failed = new AtomicReference<>();
        Runnable work;
        if (mode.equals("plain")) {
            ConcurrentLinkedQueue<Runnable> jobs = batches(producer, msgs, batch, failed);
            work = () -> {
                Runnable job;
                while (failed.get() == null && (job = jobs.poll()) != null) {
                    job.run();
                }
            };
        } else {
            TransactionMQProducer txn = (TransactionMQProducer) producer;
            AtomicInteger next = new AtomicInteger();
            work = () -> {
                int i;
                while (failed.get() == null && (i = next.getAndIncrement()) < msgs.size()) {
                    try {
                        TransactionSendResult r = txn.sendMessageInTransaction(msgs.get(i), null);
                        if (r.getSendStatus() != SendStatus.SEND_OK
                            || r.getLocalTransactionState() != LocalTransactionState.COMMIT_MESSAGE) {
                            throw new IllegalStateException("row " + i + ": " + r);
                        }
                    } catch (Throwable e) {
                        failed.compareAndSet(null, e);
                    }
                }
            };
        }
        List<Thread> running = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            Thread thread = new Thread(work, "sender-" + t);
            thread.start();
            running.add(thread);
        }
        for (Thread thread : running) {
            thread.join();
        }
        if (failed.get() != null) {
            throw new IllegalStateException("a send failed", failed.get());
        }
    }

    /** Rows placed by staticmq's rule, cut into batches per queue; the queues' batches interleaved. */
    private static ConcurrentLinkedQueue<Runnable> batches(DefaultMQProducer producer, List<Message> msgs, int batch,
        AtomicReference<Throwable> failed) throws Exception {
        List<MessageQueue> queues = producer.fetchPublishMessageQueues(msgs.get(0).getTopic());
        List<List<Message>> byQueue = new ArrayList<>();
        for (int q = 0; q < queues.size(); q++) {
            byQueue.add(new ArrayList<>());
        }
        for (Message msg : msgs) {
            long hash = murmur3(msg.getKeys().getBytes(StandardCharsets.UTF_8)) & 0xFFFFFFFFL;
            byQueue.get((int) (hash % queues.size())).add(msg);
        }
        ConcurrentLinkedQueue<Runnable> jobs = new ConcurrentLinkedQueue<>();
        for (int start = 0; ; start += batch) {
            boolean any = false;
            for (int q = 0; q < queues.size(); q++) {
                List<Message> rows = byQueue.get(q);
                if (start < rows.size()) {
                    any = true;
                    List<Message> part = rows.subList(start, Math.min(start + batch, rows.size()));
                    MessageQueue mq = queues.get(q);
                    jobs.add(() -> {
                        try {
                            SendResult r = sendBatch(producer, part, mq);
                            if (r.getSendStatus() != SendStatus.SEND_OK) {
                                throw new IllegalStateException("batch to " + mq + ": " + r);
                            }
                        } catch (Throwable e) {
                            failed.compareAndSet(null, e);
                        }
                    });
                }
            }
            if (!any) {
                return jobs;
            }
        }
    }

    /**
     * One batch; refused by the broker's flow control (SYSTEM_BUSY: a request waited in its send queue
     * longer than waitTimeMillsInSendQueue, nothing stored) it is sent again, as a user would, and counted.
     */
    private static SendResult sendBatch(DefaultMQProducer producer, List<Message> part, MessageQueue mq)
        throws Exception {
        for (int attempt = 1; ; attempt++) {
            try {
                return producer.send(part, mq);
            } catch (MQBrokerException | MQClientException e) {
                int code = e instanceof MQBrokerException ? ((MQBrokerException) e).getResponseCode()
                    : ((MQClientException) e).getResponseCode();
                if (code != ResponseCode.SYSTEM_BUSY || attempt >= 100) {
                    throw e;
                }
                BUSY.incrementAndGet();
                Thread.sleep(5);
            }
        }
    }

    /** MurmurHash3 x86_32, seed 0: staticmq_spark/hashing.py's key -> logic queue function. */
    static int murmur3(byte[] data) {
        int h = 0, n = data.length, blocks = n / 4;
        for (int i = 0; i < blocks; i++) {
            int k = (data[4 * i] & 0xFF) | (data[4 * i + 1] & 0xFF) << 8 | (data[4 * i + 2] & 0xFF) << 16
                | (data[4 * i + 3] & 0xFF) << 24;
            k = Integer.rotateLeft(k * 0xCC9E2D51, 15) * 0x1B873593;
            h = Integer.rotateLeft(h ^ k, 13) * 5 + 0xE6546B64;
        }
        int k = 0, tail = 4 * blocks;
        switch (n & 3) {
            case 3: k ^= (data[tail + 2] & 0xFF) << 16; // fall through
            case 2: k ^= (data[tail + 1] & 0xFF) << 8; // fall through
            case 1:
                k ^= data[tail] & 0xFF;
                h ^= Integer.rotateLeft(k * 0xCC9E2D51, 15) * 0x1B873593;
                break;
            default:
                break;
        }
        h ^= n;
        h ^= h >>> 16;
        h *= 0x85EBCA6B;
        h ^= h >>> 13;
        h *= 0xC2B2AE35;
        return h ^ (h >>> 16);
    }

    /** Until the queues' max offsets sum to `rows` at least (at most 300 s); the sum seen last. */
    private static long waitVisible(DefaultMQProducer producer, List<MessageQueue> queues, long rows) throws Exception {
        long deadline = System.nanoTime() + 300_000_000_000L;
        while (true) {
            long sum = maxOffsets(producer, queues);
            if (sum >= rows || System.nanoTime() > deadline) {
                return sum;
            }
            Thread.sleep(5);
        }
    }

    private static long maxOffsets(DefaultMQProducer producer, List<MessageQueue> queues) throws Exception {
        long sum = 0;
        for (MessageQueue mq : queues) {
            sum += producer.maxOffset(mq);
        }
        return sum;
    }

    private static long processCpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
            .getProcessCpuTime();
    }

    /** Whether RocketMQ takes a batch of rows as one transactional message; prints the answer. */
    private static void probeBatch(TransactionMQProducer producer, String topic, int batch, int size) throws Exception {
        MessageBatch messages = MessageBatch.generateFromList(messages(topic, batch, size));
        for (Message msg : messages) {
            org.apache.rocketmq.common.message.MessageClientIDSetter.setUniqID(msg);
        }
        messages.setBody(messages.encode());
        String answer;
        try {
            TransactionSendResult r = producer.sendMessageInTransaction(messages, null);
            answer = "accepted: " + r.getSendStatus() + " " + r.getLocalTransactionState();
        } catch (Exception e) {
            Throwable cause = e;
            StringBuilder text = new StringBuilder(e.toString());
            while (cause.getCause() != null && cause.getCause() != cause) {
                cause = cause.getCause();
                text.append(" <- ").append(cause);
            }
            answer = "refused: " + text;
        }
        System.out.println("{\"probe\": \"" + answer.replace("\\", "\\\\").replace("\"", "'").replace("\n", " ")
            + "\"}");
    }
}
