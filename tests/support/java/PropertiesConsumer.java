import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * What a Java application sees of each message: RocketMQ's own push consumer reads a topic from its
 * first message until EXPECTED messages arrived, and prints one line per message:
 * "MSG queueId msgId body name=value,name=value..." (every property getProperties() returns, sorted).
 *
 * <p>java -cp ROCKETMQ_JARS/*:CLASSES PropertiesConsumer NAMESRV TOPIC GROUP EXPECTED TIMEOUT_S
 * exits 0, or 1 when fewer arrived within TIMEOUT_S.
 */
public final class PropertiesConsumer {
    public static void main(String[] args) throws Exception {
        String namesrv = args[0], topic = args[1], group = args[2];
        int expected = Integer.parseInt(args[3]);
        long deadline = System.currentTimeMillis() + 1000L * Long.parseLong(args[4]);
        AtomicInteger consumed = new AtomicInteger();
        ConcurrentLinkedQueue<String> lines = new ConcurrentLinkedQueue<>();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("staticmq-props-" + ProcessHandle.current().pid());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt m : msgs) {
                StringBuilder props = new StringBuilder();
                for (Map.Entry<String, String> e : new TreeMap<>(m.getProperties()).entrySet()) {
                    if (props.length() > 0) {
                        props.append(',');
                    }
                    props.append(e.getKey()).append('=').append(e.getValue());
                }
                lines.add("MSG " + m.getQueueId() + " " + m.getMsgId() + " " + new String(m.getBody()) + " " + props);
            }
            consumed.addAndGet(msgs.size());
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        while (consumed.get() < expected && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);
        }
        Thread.sleep(1000); // anything beyond EXPECTED (a duplicate) arrives too
        consumer.shutdown();
        for (String line : lines) {
            System.out.println(line);
        }
        System.exit(consumed.get() >= expected ? 0 : 1);
    }
}
